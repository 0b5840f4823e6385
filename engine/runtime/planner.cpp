#include "runtime/planner.h"

#include <algorithm>
#include <optional>

#include "gate/merge.h"
#include "ops/fused.h"
#include "ops/multi_input.h"
#include "ops/specs.h"

namespace pao::runtime {

const char* routing_name(Routing r) noexcept {
  switch (r) {
    case Routing::kRoundRobin: return "round-robin";
    case Routing::kHash: return "hash";
  }
  return "?";
}

const char* ordering_name(Ordering o) noexcept {
  switch (o) {
    case Ordering::kRoundRobin: return "round-robin";
    case Ordering::kSeqno: return "seqno";
    case Ordering::kSeqnoPulses: return "seqno and pulses";
    case Ordering::kSeqnoRows: return "seqno and source rows";
  }
  return "?";
}

namespace {

// Stateless, or keyed by a known key; one input.
bool parallelizable(const GraphNode& n) {
  if (!n.op || n.inputs.size() != 1 || dynamic_cast<const ops::MultiInputOperator*>(n.op.get()) != nullptr) {
    return false;
  }
  if (n.op->kind() == ops::OpKind::kStateless) return true;
  return n.op->kind() == ops::OpKind::kPartitioned && !n.op->key_columns().empty();
}

std::vector<std::string> intersect(const std::vector<std::string>& a, const std::vector<std::string>& b) {
  std::vector<std::string> out;
  for (const std::string& x : a) {
    if (std::find(b.begin(), b.end(), x) != b.end()) out.push_back(x);
  }
  return out;
}

Ordering ordering_of(const Graph& g, const std::vector<size_t>& nodes) {
  bool keyed = false;
  ops::Selectivity worst = ops::Selectivity::kExactlyOne;
  for (size_t n : nodes) {
    keyed |= g.nodes[n].op->kind() == ops::OpKind::kPartitioned;
    worst = std::max(worst, g.nodes[n].op->selectivity());
  }
  switch (worst) {
    case ops::Selectivity::kExactlyOne: return keyed ? Ordering::kSeqno : Ordering::kRoundRobin;
    case ops::Selectivity::kAtMostOne: return Ordering::kSeqnoPulses;
    case ops::Selectivity::kAny: return Ordering::kSeqnoRows;
  }
  return Ordering::kSeqnoRows;
}

// Every operator gets its number (its place among the operators) for messages and statistics,
// unless it has one; returns how many operators there are.
size_t number_operators(Graph& g) {
  size_t number = 0;
  for (GraphNode& node : g.nodes) {
    if (node.op && node.number == GraphNode::kUnnumbered) node.number = number;
    if (node.op) ++number;
  }
  return number;
}

// Per node, the nodes reading it (an edge each) and its fan-out (consumers and outputs).
struct Consumers {
  std::vector<std::vector<size_t>> of;
  std::vector<size_t> fan_out;
  explicit Consumers(const Graph& g) : of(g.nodes.size()), fan_out(g.nodes.size(), 0) {
    for (size_t i = 0; i < g.nodes.size(); ++i) {
      for (size_t in : g.nodes[i].inputs) {
        of[in].push_back(i);
        ++fan_out[in];
      }
    }
    for (size_t o : g.outputs) ++fan_out[o];
  }
  // The one node reading `i`, if `i` feeds exactly one node and is no output.
  std::optional<size_t> only(size_t i) const {
    if (fan_out[i] != 1 || of[i].size() != 1) return std::nullopt;
    return of[i][0];
  }
};

// An operator that may run on each input before their merge (push_below_merges).
bool pushable(const GraphNode& n, const std::string& time) {
  if (!n.op || n.inputs.size() != 1 || dynamic_cast<const ops::MultiInputOperator*>(n.op.get()) != nullptr) {
    return false;
  }
  const ops::Operator& op = *n.op;
  return op.kind() == ops::OpKind::kStateless && op.max_parallelism() == 0 && !op.may_fail() &&
         op.preserves_time(time);
}

// Drops rows or columns: worth running before the merge.
bool narrows(const ops::Operator& op) {
  return op.selectivity() != ops::Selectivity::kExactlyOne ||
         op.output_schema()->fields.size() < op.input_schema()->fields.size();
}

}  // namespace

Graph key_by_epochs(Graph g) {
  for (GraphNode& n : g.nodes) {
    if (!n.op || n.inputs.size() != 1) continue;
    const GraphNode& from = g.nodes[n.inputs[0]];
    if (!from.op) continue;
    const std::optional<std::string> epoch = from.op->epoch_column();
    if (!epoch) continue;
    // The operator's keys must be the epoch's keys plus the epoch: it checks that itself.
    if (ops::OperatorPtr keyed = n.op->keyed_by_epoch(ops::key_names(*from.op), *epoch)) n.op = std::move(keyed);
  }
  return g;
}

Graph push_below_merges(Graph g) {
  if (g.time.empty()) return g;
  size_t next_number = number_operators(g);
  const Consumers consumers(g);
  const size_t n = g.nodes.size();
  // Per source node: the operators to push and the merge's inputs.
  std::vector<std::vector<size_t>> pushed(n);
  std::vector<std::vector<std::unique_ptr<BatchSource>>> parts(n);
  std::vector<bool> moved(n, false);
  bool any = false;
  for (size_t i = 0; i < n; ++i) {
    if (g.nodes[i].op) continue;
    std::vector<size_t> prefix;
    for (std::optional<size_t> c = consumers.only(i); c && pushable(g.nodes[*c], g.time); c = consumers.only(*c)) {
      prefix.push_back(*c);
    }
    while (!prefix.empty() && !narrows(*g.nodes[prefix.back()].op)) prefix.pop_back();
    if (prefix.empty()) continue;
    parts[i] = gate::unmerge(g.sources[g.nodes[i].source]);
    if (parts[i].empty()) continue;
    for (size_t m : prefix) moved[m] = true;
    pushed[i] = std::move(prefix);
    any = true;
  }
  if (!any) return g;

  Graph out;
  out.time = g.time;
  out.sources = std::move(g.sources);
  for (size_t s = 0; s < out.sources.size(); ++s) {
    out.source_origin.push_back(g.source_origin.empty() ? std::pair{s, SIZE_MAX} : g.source_origin[s]);
  }
  std::vector<size_t> index(n, SIZE_MAX);  // old node -> the new node standing for its stream
  for (size_t i = 0; i < n; ++i) {
    if (moved[i]) continue;
    GraphNode node = g.nodes[i];
    if (node.op || pushed[i].empty()) {
      for (size_t& in : node.inputs) in = index[in];
      out.nodes.push_back(std::move(node));
      index[i] = out.nodes.size() - 1;
      continue;
    }
    // The merge taken apart: per input a source, then its copy of the pushed operators.
    const std::pair<size_t, size_t> origin = out.source_origin[node.source];
    std::vector<size_t> ends;
    for (size_t j = 0; j < parts[i].size(); ++j) {
      size_t src = node.source;
      if (j == 0) {
        out.sources[src] = std::move(parts[i][0]);
      } else {
        src = out.sources.size();
        out.sources.push_back(std::move(parts[i][j]));
        out.source_origin.emplace_back();
      }
      out.source_origin[src] = {origin.first, j};
      out.nodes.push_back(GraphNode{nullptr, {}, src});
      for (size_t m : pushed[i]) {
        GraphNode copy = g.nodes[m];
        copy.inputs = {out.nodes.size() - 1};
        out.nodes.push_back(std::move(copy));
      }
      ends.push_back(out.nodes.size() - 1);
    }
    const ops::Operator& last = *g.nodes[pushed[i].back()].op;
    std::vector<std::shared_ptr<const Schema>> schemas(ends.size(), last.output_schema());
    out.nodes.push_back(GraphNode{ops::make_operator(schemas, g.time, ops::UnionSpec{}), ends, 0, next_number++});
    index[pushed[i].back()] = out.nodes.size() - 1;
  }
  for (size_t o : g.outputs) out.outputs.push_back(index[o]);
  return out;
}

Plan plan(const Graph& g, bool fuse) {
  const size_t n = g.nodes.size();
  Plan p;
  p.region_of.assign(n, -1);
  p.fused_of.assign(n, -1);
  const Consumers consumers(g);

  for (size_t i = 0; i < n; ++i) {
    const GraphNode& node = g.nodes[i];
    if (!node.op || p.region_of[i] >= 0) continue;
    if (!parallelizable(node)) {
      p.sequential.push_back(i);
      continue;
    }
    Region r;
    r.nodes.push_back(i);
    if (node.op->kind() == ops::OpKind::kPartitioned) r.key = ops::key_names(*node.op);
    size_t cur = i;
    while (const std::optional<size_t> only = consumers.only(cur)) {
      const size_t c = *only;
      const GraphNode& next = g.nodes[c];
      if (!parallelizable(next)) break;
      std::vector<std::string> key = r.key;
      if (next.op->kind() == ops::OpKind::kPartitioned) {
        key = r.key.empty() ? ops::key_names(*next.op) : intersect(r.key, ops::key_names(*next.op));
        if (key.empty()) break;
        // The split routes by the key at the region's entry: every operator before this one must
        // hand it on unchanged, so this one sees the values the split routed by.
        bool forwarded = true;
        for (size_t m : r.nodes) {
          for (const std::string& col : key) forwarded &= g.nodes[m].op->passes_through(col);
        }
        if (!forwarded) break;
      }
      r.key = key;
      r.nodes.push_back(c);
      cur = c;
    }
    r.routing = r.key.empty() ? Routing::kRoundRobin : Routing::kHash;
    r.ordering = ordering_of(g, r.nodes);
    for (size_t m : r.nodes) p.region_of[m] = static_cast<int>(p.regions.size());
    p.regions.push_back(std::move(r));
  }

  // Shuffles: a keyed region fed straight by another region whose key differs.
  for (size_t r = 0; r < p.regions.size(); ++r) {
    const Region& to = p.regions[r];
    if (to.key.empty()) continue;
    const size_t in = g.nodes[to.nodes.front()].inputs[0];
    const int from = p.region_of[in];
    if (from < 0 || p.regions[static_cast<size_t>(from)].nodes.back() != in) continue;
    if (p.regions[static_cast<size_t>(from)].key == to.key) continue;  // partitioned alike already
    p.shuffles.push_back({static_cast<size_t>(from), r, to.key});
  }

  // Fusion: runs of stateless operators of one region, and runs of partitioned operators that
  // append columns over the same key (ops::FusedChain::keyed_fusible).
  if (fuse) {
    for (const Region& r : p.regions) {
      std::vector<size_t> run;
      bool keyed = false;  // the run's kind
      auto close = [&] {
        if (run.size() >= 2) {
          for (size_t m : run) p.fused_of[m] = static_cast<int>(p.fused.size());
          p.fused.push_back(run);
        }
        run.clear();
      };
      auto ops_of = [&](const std::vector<size_t>& nodes) {
        std::vector<ops::OperatorPtr> out;
        for (size_t m : nodes) out.push_back(g.nodes[m].op);
        return out;
      };
      for (size_t m : r.nodes) {
        const ops::Operator& op = *g.nodes[m].op;
        if (op.kind() == ops::OpKind::kPartitioned) {
          // Every operator of a keyed run takes the chain's input rows, so any of them may name a
          // row: no may_fail() rule here. A run that cannot grow closes (unfused if of one).
          std::vector<size_t> longer = run;
          longer.push_back(m);
          if (!keyed || !ops::FusedChain::keyed_fusible(ops_of(longer))) {
            close();
            keyed = true;
          }
          run.push_back(m);
          continue;
        }
        const bool fusible = op.kind() == ops::OpKind::kStateless && op.max_parallelism() == 0;
        if (!fusible || keyed) {
          close();
          keyed = false;
          if (!fusible) continue;
        }
        if (!run.empty() && op.may_fail()) close();  // it may name a row: it starts its own run
        run.push_back(m);
      }
      close();
    }
  }
  return p;
}

Graph apply_fusion(Graph g, const Plan& p) {
  const size_t n = g.nodes.size();
  number_operators(g);  // every operator keeps its number for messages and statistics
  if (p.fused.empty()) return g;
  Graph out;
  out.sources = std::move(g.sources);
  out.source_origin = std::move(g.source_origin);
  out.time = g.time;
  std::vector<size_t> index(n);  // old node -> new node (a fused chain's members -> the chain)
  for (size_t i = 0; i < n; ++i) {
    const int f = p.fused_of[i];
    if (f >= 0 && p.fused[static_cast<size_t>(f)].front() != i) {
      index[i] = index[p.fused[static_cast<size_t>(f)].front()];
      continue;
    }
    GraphNode node = g.nodes[i];
    if (f >= 0) {
      const std::vector<size_t>& chain = p.fused[static_cast<size_t>(f)];
      std::vector<ops::OperatorPtr> ops;
      for (size_t m : chain) ops.push_back(g.nodes[m].op);
      node.op = std::make_shared<ops::FusedChain>(std::move(ops));
    }
    for (size_t& in : node.inputs) in = index[in];
    out.nodes.push_back(std::move(node));
    index[i] = out.nodes.size() - 1;
  }
  for (size_t o : g.outputs) out.outputs.push_back(index[o]);
  return out;
}

}  // namespace pao::runtime
