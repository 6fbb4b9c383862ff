#include "fault.h"

#include <pthread.h>

#include <infiniband/verbs.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

#include "common.h"
#include "hca.h"

namespace fakeverbs::fault {
namespace {

// A rule aimed at the WRs of QPs connected to one remote QPN (or any).
struct Target {
  bool any_qpn = true;
  uint32_t qpn = 0;
  int status = IBV_WC_RETRY_EXC_ERR;
};

struct Rules {
  pid_t pid = 0;
  std::string text;  // the FAKEVERBS_FAULT these rules were parsed from
  uint64_t fail_wr = 0;  // k-th WR of a QP aimed at `wr_target`
  Target wr_target;
  double fail_prob = 0;  // each WR of a QP aimed at `prob_target`
  Target prob_target;
  uint64_t fail_post = 0, fail_recv = 0, retry_exc = 0, rem_access = 0, drop_cqe = 0,
           qp_error = 0, delay_us = 0, fail_reg = 0, port_down = 0, resp_error = 0,
           port_flap = 0, flap_ms = 0, lid_change = 0, gid_change = 0, cq_overrun = 0,
           dc_bad_key = 0;
  uint64_t n_post = 0, n_recv = 0, n_wr = 0, n_cqe = 0, n_qp_error = 0, n_reg = 0,
           n_port_down = 0, n_resp_error = 0, n_flap = 0, n_lid = 0, n_gid = 0, n_poll = 0,
           n_dc = 0;
};

std::mutex g_mu;
Rules g_rules;

// "K@QPN:status" / "P@QPN:status": the value, then the optional target.
bool parse_target(const std::string& item, size_t from, Target* t) {
  size_t colon = item.find(':', from);
  size_t at = item.find('@', from);
  if (at != std::string::npos && at < colon) {
    char* end = nullptr;
    t->qpn = uint32_t(strtoul(item.c_str() + at + 1, &end, 0));
    t->any_qpn = false;
  }
  if (colon != std::string::npos) {
    std::string st = item.substr(colon + 1);
    if (st == "retry_exc") t->status = IBV_WC_RETRY_EXC_ERR;
    else if (st == "rem_access") t->status = IBV_WC_REM_ACCESS_ERR;
    else return false;
  }
  return true;
}

// Re-parsed whenever the variable changes (counters restart), so a test can
// aim a rule at a QPN it learns at run time; and after fork.
// The fast path compares the variable's address (setenv gives a new one)
// and a pid the fork handler resets: ibv_poll_cq asks on every call.
pid_t g_pid = 0;
const char* g_seen = nullptr;

Rules& rules() {  // caller holds g_mu
  static const bool registered = [] {
    pthread_atfork(nullptr, nullptr, [] { g_pid = 0; });
    return true;
  }();
  (void)registered;
  const char* v = getenv("FAKEVERBS_FAULT");
  if (g_pid != 0 && v == g_seen && g_rules.pid == g_pid) return g_rules;
  if (g_pid == 0) g_pid = getpid();
  g_seen = v;
  std::string s = v ? v : "";
  if (g_rules.pid == g_pid && g_rules.text == s) return g_rules;
  g_rules = Rules{};
  g_rules.pid = g_pid;
  g_rules.text = s;
  size_t pos = 0;
  while (pos < s.size()) {
    size_t end = s.find(',', pos);
    std::string item = s.substr(pos, end == std::string::npos ? end : end - pos);
    pos = end == std::string::npos ? s.size() : end + 1;
    size_t eq = item.find('=');
    std::string k = item.substr(0, eq);
    uint64_t n = eq == std::string::npos ? 0 : strtoull(item.c_str() + eq + 1, nullptr, 0);
    if (k == "fail_post") g_rules.fail_post = n;
    else if (k == "fail_recv") g_rules.fail_recv = n;
    else if (k == "retry_exc") g_rules.retry_exc = n;
    else if (k == "rem_access") g_rules.rem_access = n;
    else if (k == "drop_cqe") g_rules.drop_cqe = n;
    else if (k == "qp_error") g_rules.qp_error = n;
    else if (k == "port_down") g_rules.port_down = n;
    else if (k == "port_flap" && item.find(':', eq) != std::string::npos) {
      g_rules.port_flap = n;
      g_rules.flap_ms = strtoull(item.c_str() + item.find(':', eq) + 1, nullptr, 0);
    }
    else if (k == "lid_change") g_rules.lid_change = n;
    else if (k == "gid_change") g_rules.gid_change = n;
    else if (k == "dc_bad_key") g_rules.dc_bad_key = n;
    else if (k == "resp_error") g_rules.resp_error = n;
    else if (k == "cq_overrun") g_rules.cq_overrun = n;
    else if (k == "delay_us") g_rules.delay_us = n;
    else if (k == "fail_reg") g_rules.fail_reg = n;
    else if (k == "fail_wr" && parse_target(item, eq + 1, &g_rules.wr_target)) g_rules.fail_wr = n;
    else if (k == "fail_prob" && parse_target(item, eq + 1, &g_rules.prob_target))
      g_rules.fail_prob = strtod(item.c_str() + eq + 1, nullptr);
    else if (!k.empty()) log_error("FAKEVERBS_FAULT: unknown rule '%s' ignored", item.c_str());
  }
  return g_rules;
}

}  // namespace

bool fail_post_send() {
  std::lock_guard<std::mutex> g(g_mu);
  Rules& r = rules();
  return ++r.n_post == r.fail_post;
}

bool fail_post_recv() {
  std::lock_guard<std::mutex> g(g_mu);
  Rules& r = rules();
  return ++r.n_recv == r.fail_recv;
}

bool fail_reg_mr() {
  std::lock_guard<std::mutex> g(g_mu);
  Rules& r = rules();
  return ++r.n_reg == r.fail_reg;
}

bool qp_error_now() {
  std::lock_guard<std::mutex> g(g_mu);
  Rules& r = rules();
  return ++r.n_qp_error == r.qp_error;
}

bool cq_overrun_now(uint64_t delivered) {
  // Asked at every ibv_poll_cq, which engines spin on: without the rule the
  // variable is looked at again only every 1024th call (getenv scans the
  // whole environment), so a rule set at run time takes that long to start.
  static std::atomic<unsigned> skip{0};
  if (skip.load(std::memory_order_relaxed) != 0) {
    skip.fetch_sub(1, std::memory_order_relaxed);
    return false;
  }
  std::lock_guard<std::mutex> g(g_mu);
  Rules& r = rules();
  if (r.cq_overrun == 0) {
    skip.store(1023, std::memory_order_relaxed);
    return false;
  }
  if (r.n_poll != 0 || delivered < r.cq_overrun) return false;
  r.n_poll = 1;  // once
  return true;
}

bool resp_error_now() {
  std::lock_guard<std::mutex> g(g_mu);
  Rules& r = rules();
  return r.resp_error != 0 && ++r.n_resp_error == r.resp_error;
}

bool port_down_now() {
  std::lock_guard<std::mutex> g(g_mu);
  Rules& r = rules();
  return ++r.n_port_down == r.port_down;
}

namespace {

// Whether this call is the rule's Nth (its own counter; 0: never).
bool nth(uint64_t Rules::*count, uint64_t Rules::*at) {
  std::lock_guard<std::mutex> g(g_mu);
  Rules& r = rules();
  return r.*at != 0 && ++(r.*count) == r.*at;
}

}  // namespace

uint64_t port_flap_now() {
  if (!nth(&Rules::n_flap, &Rules::port_flap)) return 0;
  std::lock_guard<std::mutex> g(g_mu);
  return rules().flap_ms * 1'000'000 + 1;  // never 0: a 0 ms flap still happens
}

bool lid_change_now() { return nth(&Rules::n_lid, &Rules::lid_change); }

bool gid_change_now() { return nth(&Rules::n_gid, &Rules::gid_change); }

bool dc_bad_key_now() { return nth(&Rules::n_dc, &Rules::dc_bad_key); }

int wr_status(uint32_t dest_qpn, uint64_t qp_index, uint64_t* rng) {
  std::lock_guard<std::mutex> g(g_mu);
  Rules& r = rules();
  ++r.n_wr;
  auto aimed = [dest_qpn](const Target& t) { return t.any_qpn || t.qpn == dest_qpn; };
  if (r.fail_wr && qp_index == r.fail_wr && aimed(r.wr_target)) return r.wr_target.status;
  if (r.fail_prob > 0 && aimed(r.prob_target) &&
      double(next_random(*rng) >> 11) * 0x1p-53 < r.fail_prob)
    return r.prob_target.status;
  if (r.n_wr == r.retry_exc) return IBV_WC_RETRY_EXC_ERR;
  if (r.n_wr == r.rem_access) return IBV_WC_REM_ACCESS_ERR;
  return -1;
}

bool drop_cqe() {
  std::lock_guard<std::mutex> g(g_mu);
  Rules& r = rules();
  return ++r.n_cqe == r.drop_cqe;
}

uint64_t delay_ns() {
  std::lock_guard<std::mutex> g(g_mu);
  return rules().delay_us * 1000;
}

}  // namespace fakeverbs::fault
