#include "fault.h"

#include <infiniband/verbs.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

#include "common.h"

namespace fakeverbs::fault {
namespace {

struct Rules {
  pid_t pid = 0;
  uint64_t fail_post = 0, fail_recv = 0, retry_exc = 0, rem_access = 0, drop_cqe = 0,
           qp_error = 0, delay_us = 0, fail_reg = 0;
  uint64_t n_post = 0, n_recv = 0, n_wr = 0, n_cqe = 0, n_qp_error = 0, n_reg = 0;
};

std::mutex g_mu;
Rules g_rules;

Rules& rules() {  // caller holds g_mu
  if (g_rules.pid == getpid()) return g_rules;
  g_rules = Rules{};
  g_rules.pid = getpid();
  const char* v = getenv("FAKEVERBS_FAULT");
  std::string s = v ? v : "";
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
    else if (k == "delay_us") g_rules.delay_us = n;
    else if (k == "fail_reg") g_rules.fail_reg = n;
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

int wr_status() {
  std::lock_guard<std::mutex> g(g_mu);
  Rules& r = rules();
  ++r.n_wr;
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
