#pragma once
// A minimal unit-test harness: TEST(name) registers a case, CHECK/CHECK_EQ record failures and
// go on, REQUIRE stops the case, CHECK_THROWS_WITH checks an exception's kind and message. Each
// test binary runs its cases and ends with the line "N passed, N failed", which CTest reports.
#include <cstdio>
#include <exception>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

namespace unit {

struct Case {
  const char* name;
  std::function<void()> body;
};

inline std::vector<Case>& registry() {
  static std::vector<Case> cases;
  return cases;
}
inline int& failures() {
  static int n = 0;
  return n;
}
struct Register {
  Register(const char* name, std::function<void()> body) { registry().push_back({name, std::move(body)}); }
};
struct Abort {};

inline void fail(const char* file, int line, const std::string& what) {
  std::fprintf(stderr, "  %s:%d: %s\n", file, line, what.c_str());
  ++failures();
}

template <class A, class B>
std::string describe(const A& a, const B& b) {
  std::ostringstream out;
  out << a << " != " << b;
  return out.str();
}

inline int run_all() {
  int passed = 0, failed = 0;
  for (const Case& c : registry()) {
    const int before = failures();
    try {
      c.body();
    } catch (const Abort&) {
    } catch (const std::exception& e) {
      fail(c.name, 0, std::string("unexpected exception: ") + e.what());
    }
    const bool ok = failures() == before;
    std::printf("%s %s\n", ok ? "PASS" : "FAIL", c.name);
    ok ? ++passed : ++failed;
  }
  std::printf("%d passed, %d failed\n", passed, failed);
  return failed == 0 ? 0 : 1;
}

}  // namespace unit

#define UNIT_CAT2(a, b) a##b
#define UNIT_CAT(a, b) UNIT_CAT2(a, b)
#define TEST(name)                                                              \
  static void name();                                                           \
  static unit::Register UNIT_CAT(register_, name)(#name, name);                 \
  static void name()
#define CHECK(cond) \
  do { if (!(cond)) unit::fail(__FILE__, __LINE__, "CHECK(" #cond ")"); } while (0)
#define REQUIRE(cond) \
  do { if (!(cond)) { unit::fail(__FILE__, __LINE__, "REQUIRE(" #cond ")"); throw unit::Abort{}; } } while (0)
#define CHECK_EQ(a, b)                                                                         \
  do {                                                                                         \
    const auto unit_a = (a);                                                                   \
    const auto unit_b = (b);                                                                   \
    if (!(unit_a == unit_b))                                                                   \
      unit::fail(__FILE__, __LINE__, "CHECK_EQ(" #a ", " #b "): " + unit::describe(unit_a, unit_b)); \
  } while (0)
// Runs `stmt`, which must throw pao::Error of `kind` whose message contains `needle`.
#define CHECK_THROWS_WITH(stmt, kind_, needle)                                                   \
  do {                                                                                           \
    bool unit_thrown = false;                                                                    \
    try { stmt; } catch (const pao::Error& e) {                                                  \
      unit_thrown = true;                                                                        \
      if (e.kind() != (kind_)) unit::fail(__FILE__, __LINE__, std::string("wrong kind: ") + e.what()); \
      if (std::string(e.what()).find(needle) == std::string::npos)                               \
        unit::fail(__FILE__, __LINE__, std::string("message lacks '") + (needle) + "': " + e.what()); \
    }                                                                                            \
    if (!unit_thrown) unit::fail(__FILE__, __LINE__, "no exception from " #stmt);               \
  } while (0)

#define UNIT_MAIN() \
  int main() { return unit::run_all(); }
