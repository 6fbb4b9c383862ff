// plan::decide (core/plan/plan.h) without MPI: the steps it asks for, in
// the order dispatch takes them, the serving plans it answers, and what it
// never answers.
#include <gtest/gtest.h>

#include <climits>
#include <cstring>
#include <string>

#include "core/config/rules.h"
#include "core/plan/plan.h"

namespace mlxa2a::core::plan {
namespace {

using config::rules::Table;

Table parse_ok(std::string_view text) {
  std::string error;
  auto t = Table::parse(text, &error);
  EXPECT_TRUE(t) << text << ": " << error;
  return t ? *t : Table{};
}

Capabilities single_node() {
  Capabilities c;
  c.shm = true;
  c.nodes = 1;
  return c;
}

Capabilities multi_node(bool rdma) {
  Capabilities c;
  c.nodes = 2;
  c.hier = true;
  c.rdma = rdma;
  c.hier_auto_limit = 2048;
  return c;
}

// What dispatch knows of a set-up team with an engine that compares sizes.
Query ready(const Table& t, std::uint64_t bytes, const Capabilities& caps, Route engine_route) {
  Query q;
  q.bytes = bytes;
  q.tune = &t;
  q.team = Team::ready;
  q.caps = caps;
  q.engine = true;
  q.compares_sizes = true;
  q.engine_route = engine_route;
  q.tuning = Tuning::off;
  return q;
}

bool says(const Plan& a, const char* text) {
  return a.reason && std::strstr(a.reason, text) != nullptr;
}

// A dispatch without MPI: takes the steps decide asks for on a team that
// becomes `after` once looked up (pending teams set up to `set_up_caps`) and
// whose tuning, once started, is `tuning`. Returns the final answer and the
// questions asked.
struct Walk {
  Plan answer;
  int questions = 0;
};
Walk walk(Query q, Team after, const Capabilities& set_up_caps, Tuning tuning) {
  Walk w{};
  for (;;) {
    w.answer = decide(q);
    ++w.questions;
    switch (w.answer.serve) {
      case Serve::look_up_team:
        EXPECT_EQ(q.team, Team::unknown);
        q.team = after;
        break;
      case Serve::set_up:
        EXPECT_EQ(q.team, Team::pending);
        q.team = Team::ready;
        q.caps = set_up_caps;
        break;
      case Serve::start_tuning:
        EXPECT_EQ(q.tuning, Tuning::unknown);
        q.tuning = tuning;
        break;
      case Serve::check_sizes:
        EXPECT_FALSE(q.sizes_checked);
        q.sizes_checked = true;
        break;
      case Serve::measure:  // a trial of the fixed route
        EXPECT_FALSE(q.measured.asked);
        q.measured = {true, w.answer.route, "tuning: trial", true, true, false, 0};
        break;
      case Serve::quiet_class:
        EXPECT_FALSE(q.quiet_class.asked);
        q.quiet_class = {true, true, "tuned: pmpi", 40};
        break;
      default:
        return w;
    }
    if (w.questions > 8) return w;
  }
}

TEST(Plan, NamesRoundTripAndFamiliesAreTuneNames) {
  for (std::size_t i = 0; i < kRouteKinds; ++i) {
    const auto r = static_cast<Route>(i);
    EXPECT_EQ(route_from_string(to_string(r)), r);
    EXPECT_EQ(concrete_route_from_string(to_string(r)).has_value(), is_concrete(r));
    // The trace's path= is a family, one of the names MLXA2A_TUNE accepts.
    if (r != Route::auto_) {
      EXPECT_TRUE(config::rules::rule_route_from_string(to_string(family(r))))
          << to_string(r);
    }
  }
  EXPECT_EQ(family(Route::zcopy), Route::rdma);
  EXPECT_EQ(family(Route::hier), Route::shm);
  EXPECT_EQ(family(Route::cma), Route::shm);
  EXPECT_FALSE(config::rules::rule_route_from_string("line"));  // MLXA2A_TUNE as before
  EXPECT_FALSE(route_from_string("fast"));
}

TEST(Plan, FirstCallLooksTheTeamUpUnlessEverySizeGoesToPmpi) {
  const Table automatic, pmpi = parse_ok("pmpi"), some = parse_ok("0-64:pmpi");
  Query q;
  q.bytes = 8;
  q.tune = &automatic;
  EXPECT_EQ(decide(q).serve, Serve::look_up_team);
  q.tune = &pmpi;  // no rank builds anything: plain PMPI, no look-up
  EXPECT_EQ(decide(q).serve, Serve::pmpi);
  EXPECT_EQ(decide(q).route, Route::pmpi);
  q.sizes_differ = true;
  EXPECT_EQ(decide(q).serve, Serve::pmpi);
  // A pmpi size of a table with other sizes: the rank takes the collective
  // steps an engine peer takes (mixed decisions), so it looks the team up.
  q.tune = &some;
  EXPECT_EQ(decide(q).serve, Serve::look_up_team);
  q.sizes_differ = false;
  EXPECT_EQ(decide(q).serve, Serve::look_up_team);
}

TEST(Plan, PmpiBySizeOrArgumentsRunsBesideTheEngineCheck) {
  const Table automatic, some = parse_ok("0-64:pmpi");
  Query q = ready(some, 8, single_node(), Route::line);
  Plan a = decide(q);
  EXPECT_EQ(a.serve, Serve::pmpi_beside);
  EXPECT_EQ(a.route, Route::pmpi);
  EXPECT_TRUE(says(a, "MLXA2A_TUNE selects pmpi"));
  q = ready(automatic, 8, single_node(), Route::line);
  q.sizes_differ = true;
  a = decide(q);
  EXPECT_EQ(a.serve, Serve::pmpi_beside);
  EXPECT_TRUE(says(a, "send and receive sizes differ"));
  q.compares_sizes = false;  // an engine that compares nothing: plain PMPI
  EXPECT_EQ(decide(q).serve, Serve::pmpi);
  EXPECT_EQ(decide(q).route, Route::pmpi);
  // Above 2 GiB per peer no engine serves; PMPI beside the check.
  q = ready(automatic, std::uint64_t{INT_MAX} + 1, single_node(), Route::cma);
  a = decide(q);
  EXPECT_EQ(a.serve, Serve::pmpi_beside);
  EXPECT_TRUE(says(a, "above 2 GiB"));
  q.bytes = INT_MAX;
  EXPECT_EQ(decide(q).route, Route::cma);
}

TEST(Plan, StatesWithoutATeamFallThroughWithTheirReason) {
  const Table automatic, some = parse_ok("0-64:pmpi");
  Query q = ready(automatic, 8, single_node(), Route::line);
  q.team = Team::unavailable;
  EXPECT_TRUE(says(decide(q), "communicator state unavailable"));
  q.team = Team::inter;
  EXPECT_TRUE(says(decide(q), "intercommunicator"));
  q.team = Team::setup_failed;
  EXPECT_TRUE(says(decide(q), "set-up failed"));
  q.team = Team::none;
  q.caps = Capabilities{};
  EXPECT_TRUE(says(decide(q), "no engine available"));
  // A pmpi size keeps its own reason on an intercommunicator or without a team.
  q.tune = &some;
  for (Team t : {Team::inter, Team::none}) {
    q.team = t;
    EXPECT_EQ(decide(q).serve, Serve::pmpi);
    EXPECT_TRUE(says(decide(q), "MLXA2A_TUNE selects pmpi")) << int(t);
  }
}

TEST(Plan, DerivedTeamSetsUpThenDecidesWithTheAgreedCaps) {
  const Table automatic;
  Query q;
  q.bytes = 8;
  q.tune = &automatic;
  q.measure = false;
  q.caps = multi_node(true);  // tentative: the ancestor had RDMA
  q.engine = true;
  q.engine_route = Route::hier;
  q.tuning = Tuning::off;
  // Set-up found no RDMA anywhere: the leaders exchange over PMPI.
  Walk w = walk(q, Team::pending, multi_node(false), Tuning::off);
  EXPECT_EQ(w.questions, 3);  // look up, set up, run
  EXPECT_EQ(w.answer.serve, Serve::engine);
  EXPECT_EQ(w.answer.route, Route::hier);
  EXPECT_TRUE(says(w.answer, "leaders over PMPI"));
  // A pmpi size sets a pending team up too (a peer may be routed to its engine).
  const Table some = parse_ok("0-64:pmpi");
  q.tune = &some;
  q.compares_sizes = true;
  w = walk(q, Team::pending, multi_node(false), Tuning::off);
  EXPECT_EQ(w.questions, 3);
  EXPECT_EQ(w.answer.serve, Serve::pmpi_beside);
}

TEST(Plan, MeasuredSelectionStartsOnceAndBeginsWithTheFixedRoute) {
  const Table automatic, shm = parse_ok("shm");
  Query q;
  q.bytes = 64;
  q.tune = &automatic;
  q.caps = single_node();
  q.engine = true;
  q.compares_sizes = true;
  q.engine_route = Route::line;
  Walk w = walk(q, Team::ready, q.caps, Tuning::on);
  EXPECT_EQ(w.questions, 4);  // look up, start tuning, measure, serve
  EXPECT_EQ(w.answer.serve, Serve::engine);
  EXPECT_EQ(w.answer.route, Route::line);  // the walk's trial of the fixed route
  EXPECT_TRUE(w.answer.timed);
  // Nothing to measure on this team: the fixed rules.
  w = walk(q, Team::ready, q.caps, Tuning::off);
  EXPECT_EQ(w.answer.serve, Serve::engine);
  EXPECT_EQ(w.answer.route, Route::line);
  // Where PMPI is the fixed rules' choice, measurement starts from pmpi.
  q.caps.shm_auto_limit = 32;
  w = walk(q, Team::ready, q.caps, Tuning::on);
  EXPECT_EQ(w.answer.serve, Serve::pmpi_beside);
  EXPECT_EQ(w.answer.route, Route::pmpi);
  EXPECT_TRUE(w.answer.timed);
  // Not measured: an explicit rule, 0 bytes, above 2 GiB, or samples off.
  q.caps = single_node();
  q.tune = &shm;
  EXPECT_EQ(walk(q, Team::ready, q.caps, Tuning::on).answer.serve, Serve::engine);
  q.tune = &automatic;
  q.bytes = 0;
  EXPECT_EQ(walk(q, Team::ready, q.caps, Tuning::on).answer.serve, Serve::engine);
  q.bytes = std::uint64_t{INT_MAX} + 1;
  EXPECT_EQ(walk(q, Team::ready, q.caps, Tuning::on).answer.serve, Serve::pmpi_beside);
  q.bytes = 64;
  q.measure = false;
  EXPECT_EQ(walk(q, Team::ready, q.caps, Tuning::unknown).answer.serve, Serve::engine);
}

TEST(Plan, RdmaTeamsTakeTheEnginesRouteRdmaOrZcopy) {
  const Table automatic, rdma = parse_ok("rdma"), shm = parse_ok("shm");
  for (Route engine : {Route::rdma, Route::zcopy}) {
    for (const Table* t : {&automatic, &rdma, &shm}) {
      Query q = ready(*t, 4096, multi_node(true), engine);
      const Plan a = decide(q);
      EXPECT_EQ(a.serve, Serve::engine);
      EXPECT_EQ(a.route, engine);
    }
  }
  // A team that lost its engine never gets an engine route.
  Query q = ready(automatic, 8, single_node(), Route::line);
  q.engine = false;
  EXPECT_EQ(decide(q).route, Route::pmpi);
}

// What a team's measured selection answered becomes the serving plan: the
// form its route takes on the team as it stands, timed or memoised.
Query measured(const Table& t, const Capabilities& caps, Route engine_route, Route answered,
               bool timed) {
  Query q = ready(t, 64, caps, engine_route);
  q.tuning = Tuning::on;
  q.hier = caps.hier;
  q.measured = {true, answered, "tuning: trial", timed, timed, false, timed ? 0u : 99u};
  return q;
}

TEST(Plan, MeasuredSelectionAsksOnceThenServesItsAnswer) {
  const Table automatic;
  Query q = ready(automatic, 64, single_node(), Route::line);
  q.tuning = Tuning::on;
  Plan p = decide(q);
  EXPECT_EQ(p.serve, Serve::measure);
  EXPECT_EQ(p.route, Route::line);  // the fixed rules' route is tried first
  // A tune file makes begin() collective: sizes are checked before it.
  q.check_first = true;
  EXPECT_EQ(decide(q).serve, Serve::check_sizes);
  q.sizes_checked = true;
  EXPECT_EQ(decide(q).serve, Serve::measure);
  // Untimed: the decided route, memoised up to the selection's next event.
  p = decide(measured(automatic, single_node(), Route::line, Route::copy, false));
  EXPECT_EQ(p.serve, Serve::engine);
  EXPECT_EQ(p.route, Route::copy);
  EXPECT_EQ(p.memo_until, 99u);
  EXPECT_FALSE(p.timed);
  // Timed: no memo; a single-node pmpi trial runs beside the size check.
  p = decide(measured(automatic, single_node(), Route::line, Route::pmpi, true));
  EXPECT_EQ(p.serve, Serve::pmpi_beside);
  EXPECT_TRUE(p.timed && p.trial);
  EXPECT_FALSE(p.beside_trial);
  EXPECT_EQ(p.memo_until, 0u);
}

TEST(Plan, MultiNodePmpiTrialTimesTheFormItsCallsWillTake) {
  const Table automatic;
  Query q = measured(automatic, multi_node(true), Route::rdma, Route::pmpi, true);
  q.quiet_eligible = false;  // an engine class is decided: calls stay checked
  Plan p = decide(q);
  EXPECT_EQ(p.serve, Serve::pmpi_beside);
  EXPECT_TRUE(p.beside_trial);
  EXPECT_STREQ(p.suffix, "; the check beside PMPI timed");
  q.contained = true;  // containment serves it
  EXPECT_EQ(decide(q).serve, Serve::contained);
  q.contained = false;
  q.quiet_eligible = true;  // its calls may become quiet: PMPI alone is timed
  p = decide(q);
  EXPECT_EQ(p.serve, Serve::check_then_pmpi);
  EXPECT_STREQ(p.suffix, "");
}

TEST(Plan, ZcopyIsNamedInTheTraceWhereTheReasonDoesNot) {
  const Table automatic;
  Query q = ready(automatic, 4096, multi_node(true), Route::zcopy);
  EXPECT_STREQ(decide(q).suffix, " zcopy");  // the fixed rules' reason
  q = measured(automatic, multi_node(true), Route::zcopy, Route::zcopy, false);
  EXPECT_STREQ(decide(q).suffix, "");  // "tuned: zcopy ..." names it
  q.measured.fixed = true;             // the selection fell back to the fixed rules
  EXPECT_STREQ(decide(q).suffix, " zcopy");
}

TEST(Plan, ContainedTeamsServeEngineAndCheckedRoutesThroughContainment) {
  const Table automatic, some = parse_ok("0-64:pmpi");
  Query q = ready(automatic, 4096, multi_node(true), Route::rdma);
  q.contained = true;
  Plan p = decide(q);
  EXPECT_EQ(p.serve, Serve::contained);
  EXPECT_EQ(p.route, Route::rdma);
  q = ready(some, 8, multi_node(true), Route::rdma);
  q.contained = true;
  EXPECT_EQ(decide(q).serve, Serve::contained);
  q.bytes = 0;  // no peer takes part: the check beside PMPI as before
  q.tune = &automatic;
  q.sizes_differ = true;
  EXPECT_EQ(decide(q).serve, Serve::pmpi_beside);
  // The memo's replay takes the same forms.
  EXPECT_EQ(form(Route::rdma, false, true, true, 8), Serve::contained);
  EXPECT_EQ(form(Route::rdma, false, true, false, 8), Serve::engine);
  EXPECT_EQ(form(Route::pmpi, true, true, true, 8), Serve::pmpi);
  EXPECT_EQ(form(Route::pmpi, false, false, false, 8), Serve::pmpi);
  EXPECT_EQ(form(Route::pmpi, false, true, false, 8), Serve::pmpi_beside);
}

TEST(Plan, QuietTeamsServePmpiAloneAndMemoiseDecidedClassesToTheBoundary) {
  const Table automatic, some = parse_ok("0-64:pmpi");
  Query q = ready(automatic, 4096, multi_node(false), Route::hier);
  q.tuning = Tuning::on;
  q.quiet = true;
  EXPECT_EQ(decide(q).serve, Serve::quiet_class);
  q.quiet_class = {true, true, "tuned: pmpi", 40};
  Plan p = decide(q);
  EXPECT_EQ(p.serve, Serve::pmpi);
  EXPECT_EQ(p.memo_until, 40u);
  EXPECT_TRUE(says(p, "tuned: pmpi"));
  q.quiet_class = {true, false, "quiet pmpi: size class held on PMPI until quiet ends", 0};
  p = decide(q);
  EXPECT_EQ(p.serve, Serve::pmpi);
  EXPECT_EQ(p.memo_until, 0u);
  // Without asking the class: mismatched sizes, a pmpi rule, above 2 GiB.
  q.quiet_class = {};
  q.sizes_differ = true;
  EXPECT_TRUE(says(decide(q), "sizes differ"));
  q.sizes_differ = false;
  q.tune = &some;
  q.bytes = 8;
  EXPECT_TRUE(says(decide(q), "MLXA2A_TUNE selects pmpi"));
  q.tune = &automatic;
  q.bytes = std::uint64_t{INT_MAX} + 1;
  EXPECT_TRUE(says(decide(q), "above 2 GiB"));
  // A 0-byte call is not quiet's: the team's engine returns at once.
  q.bytes = 0;
  EXPECT_NE(decide(q).serve, Serve::quiet_class);
}

// Every combination of what dispatch can know: the answer is one of the
// allowed ones for that state, and a walk from any start ends within six
// questions.
TEST(Plan, ExhaustiveInvariants) {
  const Table tables[] = {Table{}, parse_ok("pmpi"), parse_ok("shm"), parse_ok("rdma"),
                          parse_ok("0-64:pmpi"), parse_ok("0-64:shm#64-inf:rdma")};
  const std::uint64_t sizes[] = {0, 1, 64, 2047, 2048, 1 << 20, std::uint64_t{INT_MAX} + 1};
  Capabilities caps_list[] = {Capabilities{}, single_node(), multi_node(false), multi_node(true),
                              single_node(), multi_node(false)};
  caps_list[4].shm_auto_limit = 1024;
  caps_list[5].hier_auto_limit = 0;
  const Route engine_routes[] = {Route::line, Route::copy, Route::cma, Route::hier, Route::rdma,
                                 Route::zcopy};
  int cases = 0;
  for (const Table& t : tables) {
    for (std::uint64_t bytes : sizes) {
      for (const Capabilities& caps : caps_list) {
        for (int team = 0; team <= static_cast<int>(Team::ready); ++team) {
          for (int tuning = 0; tuning <= static_cast<int>(Tuning::on); ++tuning) {
            for (int bits = 0; bits < 64; ++bits) {
              for (Route er : engine_routes) {
                Query q;
                q.bytes = bytes;
                q.tune = &t;
                q.team = static_cast<Team>(team);
                q.tuning = static_cast<Tuning>(tuning);
                q.caps = caps;
                q.sizes_differ = bits & 1;
                q.measure = bits & 2;
                q.engine = bits & 4;
                q.compares_sizes = (bits & 8) && q.engine;
                q.contained = (bits & 16) && q.engine && team == int(Team::ready);
                q.quiet = (bits & 32) && team == int(Team::ready) && q.tuning == Tuning::on;
                q.engine_route = er;
                const Plan a = decide(q);
                ++cases;
                const std::string where = "case " + std::to_string(cases);
                switch (a.serve) {
                  case Serve::look_up_team: EXPECT_EQ(q.team, Team::unknown) << where; break;
                  case Serve::set_up: EXPECT_EQ(q.team, Team::pending) << where; break;
                  case Serve::start_tuning:
                    EXPECT_EQ(q.tuning, Tuning::unknown) << where;
                    EXPECT_TRUE(q.measure && bytes != 0 && bytes <= INT_MAX) << where;
                    EXPECT_EQ(t.lookup(bytes), Route::auto_) << where;
                    break;
                  case Serve::pmpi_beside:
                    EXPECT_EQ(q.team, Team::ready) << where;
                    EXPECT_TRUE(q.compares_sizes) << where;
                    EXPECT_EQ(a.route, Route::pmpi) << where;
                    EXPECT_NE(a.reason, nullptr) << where;
                    break;
                  case Serve::measure:
                    EXPECT_EQ(q.tuning, Tuning::on) << where;
                    EXPECT_FALSE(q.sizes_differ) << where;
                    EXPECT_TRUE(a.route == Route::pmpi || (q.engine && a.route == er)) << where;
                    break;
                  case Serve::contained:
                    EXPECT_TRUE(q.contained) << where;
                    EXPECT_EQ(q.team, Team::ready) << where;
                    break;
                  case Serve::pmpi:
                    EXPECT_NE(a.reason, nullptr) << where;
                    EXPECT_EQ(a.route, Route::pmpi) << where;
                    EXPECT_EQ(a.memo_until, 0u) << where;
                    break;
                  case Serve::engine:
                    EXPECT_NE(a.reason, nullptr) << where;
                    EXPECT_TRUE(is_concrete(a.route)) << where;
                    EXPECT_FALSE(q.contained) << where;
                    EXPECT_EQ(a.memo_until, kMemoForever) << where;
                    EXPECT_STREQ(a.suffix, a.route == Route::zcopy ? " zcopy" : "") << where;
                    {
                      // An engine route: a set-up team's own, for a call
                      // whose sizes agree, that no pmpi rule covers.
                      EXPECT_EQ(q.team, Team::ready) << where;
                      EXPECT_TRUE(q.engine) << where;
                      EXPECT_EQ(a.route, er) << where;
                      EXPECT_FALSE(q.sizes_differ) << where;
                      EXPECT_NE(t.lookup(bytes), Route::pmpi) << where;
                      EXPECT_LE(bytes, std::uint64_t{INT_MAX}) << where;
                    }
                    break;
                  case Serve::quiet_class:
                    EXPECT_TRUE(q.quiet && bytes != 0 && bytes <= INT_MAX) << where;
                    EXPECT_FALSE(q.sizes_differ) << where;
                    break;
                  default:  // check_sizes and check_then_pmpi need an answered selection
                    ADD_FAILURE() << where << " serve " << int(a.serve);
                }
                if (config::rules::pmpi_for_every_size(t)) {
                  EXPECT_EQ(a.serve, Serve::pmpi) << where;
                  EXPECT_EQ(a.route, Route::pmpi) << where;
                }
                if (q.team == Team::unknown) {
                  const Walk w = walk(q, Team::pending, caps, Tuning::on);
                  EXPECT_LE(w.questions, 6) << where;
                  EXPECT_FALSE(is_step(w.answer.serve)) << where;
                }
              }
            }
          }
        }
      }
    }
  }
  EXPECT_GT(cases, 200000);
}

}  // namespace
}  // namespace mlxa2a::core::plan
