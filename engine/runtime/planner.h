#pragma once
// The planner: the auto-parallelization paper's compiler (sections 3 and 4.1-4.4) over a graph of
// operators, used by in-process runs (fusion) and by pyarrow_ops.spark (stages and shuffles),
// so a graph is planned the same way wherever it runs.
//
// Operator model (ops/operator.h): each operator declares its state kind, key, selectivity class,
// whether it forwards columns (passes_through) and keeps the time (preserves_time).
//
// Parallel regions (section 3.3), formed left to right over the nodes in topological order: a
// region starts at a stateless or keyed (partitioned) operator of one input, and takes the next
// operator while (section 3.1's conditions) the last one feeds only it (fan-out 1, not an output),
// it has one input (fan-in 1), it is stateless or keyed, and the keys stay compatible: the
// region's key is the intersection of its keyed operators' keys, never empty, and every operator
// of the region forwards it unchanged. Stateful operators and those of several inputs (union,
// joins) run outside regions (sequential, in the paper's terms: one channel).
//
// Routing and ordering (sections 4.2, 4.3, Table 1): a stateless region is routed round-robin,
// a keyed one by a hash of its key. The ordering strategy follows the region's selectivity: every
// operator exactly one and no state, round-robin; exactly one with keyed state, sequence numbers;
// at most one, sequence numbers and pulses. Where the paper stops (selectivity above one is not
// parallelized there), we go on: our merger orders by the input's sequence number and then each
// output row's source row (ops::Piece), so prolific operators parallelize too ("seqno and source
// rows"). In process every strategy is carried out by the reorder buffers, with empty outputs as
// the pulses; Spark carries them out with its sequence-number columns.
//
// Shuffles (section 4.4): between two adjacent regions whose keys are incompatible.
//
// Fusion (section 3, PEs): within a region, each run of consecutive stateless operators runs as
// one task (ops::FusedChain), except operators limited to fewer workers (map_batches) and an
// operator that may fail on a row's values after the first of a run (so an error still names the
// row of that operator's own input). Beyond the paper, each run of consecutive partitioned
// operators that append columns over the same key runs as one keyed chain
// (ops::FusedChain::keyed_fusible; ops/fused.h argues why the output is the same).
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/pipeline.h"

namespace pao::runtime {

enum class Routing : uint8_t { kRoundRobin, kHash };
enum class Ordering : uint8_t { kRoundRobin, kSeqno, kSeqnoPulses, kSeqnoRows };
const char* routing_name(Routing r) noexcept;    // "round-robin", "hash"
const char* ordering_name(Ordering o) noexcept;  // "round-robin", "seqno", "seqno and pulses", "seqno and source rows"

struct Region {
  std::vector<size_t> nodes;     // graph node indices, a chain in order
  std::vector<std::string> key;  // the routing key; empty for a stateless region
  Routing routing = Routing::kRoundRobin;
  Ordering ordering = Ordering::kRoundRobin;
};

struct Shuffle {
  size_t from = 0;  // region indices
  size_t to = 0;
  std::vector<std::string> key;
};

struct Plan {
  std::vector<Region> regions;
  std::vector<size_t> sequential;          // operator nodes outside every region
  std::vector<std::vector<size_t>> fused;  // chains of nodes that run as one task (two or more)
  std::vector<Shuffle> shuffles;
  std::vector<int> region_of;              // per graph node: its region, or -1
  std::vector<int> fused_of;               // per graph node: its fused chain, or -1
};

// Keys by epoch: an operator right after one that numbers its key's runs (epoch_column(), e.g.
// sessionize's session) and keyed by that key plus the run number becomes the same operator keyed
// by the key alone, restarting its state at each new run (Operator::keyed_by_epoch). The output is
// the same: a run number once left never comes back along its key's tuples, so the state of
// (key, old run) is never read again, and each key's tuples keep their order under either
// partitioning (both are routed by a hash of a key the region forwards). The state drops from one
// slot per key and run to one per key, and the key table from two columns to one.
Graph key_by_epochs(Graph g);

// Operators below the merge (issue 29; docs/architecture.md "Operators below the merge"): a
// source that merges several inputs (gate::make_merge) and feeds one chain whose first operators
// are stateless, keep the time column, cannot fail and work row by row (every worker may run
// them: not map_batches) is taken apart (gate::unmerge): each input becomes a source of its own,
// followed by its own node of each of those operators (the same operator object: a stateless
// operator is shared by any number of workers), and a union of the branches takes the merge's
// place. The union's order, (time, branch, position in the branch), is the merge's (time, input,
// position) restricted to the rows the operators keep, because every pushed operator keeps each
// row's time and its branch's row order: the streams after the union equal those after the
// merged chain, row for row. The pushed prefix ends at its last operator that drops rows or
// columns (a filter, a narrowing select), since moving one that only adds columns would make the
// union copy more. The pushed operators cannot fail, so no error names a row of a branch instead
// of the merged stream's; the inputs are checked (schemas, sorted times) exactly as by the merge.
// Operators keep their numbers (errors, statistics: the copies of one report together); the
// union is numbered after every operator of `g`. Returns `g` unchanged when nothing moves.
Graph push_below_merges(Graph g);

// Plans `g` (sources and operators, as built for a run). With fuse false no chain is fused.
Plan plan(const Graph& g, bool fuse = true);

// `g` with every fused chain of `p` replaced by one node running an ops::FusedChain; the other
// nodes are kept, renumbered, and the outputs point at their nodes' replacements.
Graph apply_fusion(Graph g, const Plan& p);

}  // namespace pao::runtime
