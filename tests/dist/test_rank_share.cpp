// How node ranks share NUMA domains and cores (plan_rank_share): whole domains when there are enough,
// round-robin with split cores when ranks outnumber domains, shared cores when they outnumber cores.
#include <set>
#include <vector>

#include "catch.h"
#include "dist/numa_binding.h"

using mt::dist::plan_rank_share;

TEST_CASE("one rank per domain, and several domains per rank when ranks are fewer", "[binding]") {
  const std::vector<int> two_sockets = {8, 8};
  auto a = plan_rank_share(0, 2, two_sockets), b = plan_rank_share(1, 2, two_sockets);
  CHECK(a.domains == std::vector<int>{0});
  CHECK(b.domains == std::vector<int>{1});
  CHECK((a.first_core == 0 && a.core_count == 8 && b.first_core == 0 && b.core_count == 8));
  auto whole = plan_rank_share(0, 1, two_sockets);
  CHECK(whole.domains == std::vector<int>{0, 1});
  CHECK(whole.core_count == 16);
  auto three = plan_rank_share(2, 3, {4, 4, 4, 4});
  CHECK(three.domains == std::vector<int>{2, 3});
}

TEST_CASE("more ranks than domains: round-robin, the domain's cores split without overlap", "[binding]") {
  const std::vector<int> domains = {6, 6};
  std::set<std::pair<int, int>> used;  // (domain, core)
  for (int r = 0; r < 4; ++r) {
    const auto s = plan_rank_share(r, 4, domains);
    REQUIRE(s.domains.size() == 1);
    CHECK(s.domains[0] == r % 2);
    CHECK(s.core_count == 3);
    for (int c = s.first_core; c < s.first_core + s.core_count; ++c) CHECK(used.insert({s.domains[0], c}).second);
  }
  CHECK(used.size() == 12);
}

TEST_CASE("more ranks than cores: every rank gets one core, shared round-robin", "[binding]") {
  const std::vector<int> one_domain = {2};
  for (int r = 0; r < 3; ++r) {
    const auto s = plan_rank_share(r, 3, one_domain);
    CHECK(s.domains == std::vector<int>{0});
    CHECK(s.core_count == 1);
    CHECK(s.first_core == r % 2);
  }
  // 2 ranks on 2 cores: one core each.
  CHECK(plan_rank_share(1, 2, one_domain).first_core == 1);
}
