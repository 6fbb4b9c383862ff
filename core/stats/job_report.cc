#include "core/stats/job_report.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <sstream>

namespace mlxa2a::core::stats {

namespace {

// Names are ours (paths, candidates, counter names): no spaces, no quotes.
std::string number(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

std::string spread_json(const std::vector<double>& v) {
  const Spread s = spread(v);
  return "{\"min\": " + number(s.min) + ", \"median\": " + number(s.median) +
         ", \"max\": " + number(s.max) + "}";
}

std::string calls_json(const std::vector<RankStats>& ranks) {
  std::set<std::pair<int, std::string>> keys;
  for (const RankStats& r : ranks) {
    for (const auto& [k, _] : r.calls) keys.insert(k);
  }
  std::string out = "[";
  for (const auto& key : keys) {
    // Over the ranks that made calls of this size and path (others are not
    // members of such a communicator, or took another path).
    std::vector<double> calls, bytes, seconds;
    for (const RankStats& r : ranks) {
      const auto it = r.calls.find(key);
      if (it == r.calls.end()) continue;
      calls.push_back(static_cast<double>(it->second.calls));
      bytes.push_back(static_cast<double>(it->second.bytes));
      seconds.push_back(it->second.seconds);
    }
    out += std::string(out.size() > 1 ? ",\n" : "\n") + "    {\"comm_size\": " +
           std::to_string(key.first) + ", \"path\": \"" + key.second + "\", \"ranks\": " +
           std::to_string(calls.size()) + ",\n     \"calls\": " + spread_json(calls) +
           ",\n     \"bytes\": " + spread_json(bytes) + ",\n     \"seconds\": " +
           spread_json(seconds) + "}";
  }
  return out + (keys.empty() ? "]" : "\n  ]");
}

std::string decisions_json(const std::vector<RankStats>& ranks) {
  // One entry per (communicator size, size class, path); every rank of a team
  // holds the same agreed medians, so the first rank's stand for it and the
  // agreement's duration is spread over the ranks that took part.
  std::map<Decision, std::vector<double>> agreements;
  std::map<Decision, const Decision*> first;
  for (const RankStats& r : ranks) {
    // A rank counts once per entry: it may decide the same class alike on
    // several communicators of one size.
    std::set<Decision> seen;
    for (const Decision& d : r.decisions) {
      if (!seen.insert(d).second) continue;
      agreements[d].push_back(d.agreement_seconds);
      first.emplace(d, &d);
    }
  }
  std::string out = "[";
  for (const auto& [d, secs] : agreements) {
    const std::uint64_t from = std::uint64_t{1} << d.size_class;
    std::string medians;
    for (const auto& [name, sec] : first[d]->medians_seconds) {
      medians += std::string(medians.empty() ? "" : ", ") + "\"" + name + "\": " + number(sec);
    }
    out += std::string(out.size() > 1 ? ",\n" : "\n") + "    {\"comm_size\": " +
           std::to_string(d.comm_size) + ", \"bytes_per_peer_from\": " + std::to_string(from) +
           ", \"bytes_per_peer_to\": " + std::to_string(2 * from - 1) + ", \"path\": \"" +
           d.path + "\", \"ranks\": " + std::to_string(secs.size()) +
           ",\n     \"medians_seconds\": {" + medians + "},\n     \"agreement_seconds\": " +
           spread_json(secs) + "}";
  }
  return out + (agreements.empty() ? "]" : "\n  ]");
}

std::string named_json(const std::vector<RankStats>& ranks,
                       std::map<std::string, double> RankStats::*field) {
  std::set<std::string> names;
  for (const RankStats& r : ranks) {
    for (const auto& [n, _] : r.*field) names.insert(n);
  }
  std::string out = "{";
  for (const std::string& n : names) {
    std::vector<double> v;
    for (const RankStats& r : ranks) {
      const auto it = (r.*field).find(n);
      v.push_back(it == (r.*field).end() ? 0.0 : it->second);  // a rank without it had none
    }
    out += std::string(out.size() > 1 ? ",\n" : "\n") + "    \"" + n + "\": " + spread_json(v);
  }
  return out + (names.empty() ? "}" : "\n  }");
}

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (const char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) >= 0x20) out += c;
  }
  return out + "\"";
}

double named_value(const std::map<std::string, double>& m, const char* name) {
  const auto it = m.find(name);
  return it == m.end() ? 0.0 : it->second;
}

// One entry per rank that opened a device (docs/stats.md "fabric"): what it
// chose, and the queue pairs and registrations it holds, so a report shows
// each node's leaders side by side.
std::string fabric_json(const std::vector<RankStats>& ranks) {
  std::string out = "[";
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    const RankStats& r = ranks[i];
    if (r.fabric.empty()) continue;
    std::string fields;
    for (auto [key, value] : r.fabric) {
      std::replace(key.begin(), key.end(), '-', '_');
      fields += ", " + json_string(key) + ": " + json_string(value);
    }
    out += std::string(out.size() > 1 ? ",\n" : "\n") + "    {\"rank\": " + std::to_string(i) +
           ", \"host\": " + json_string(r.host) + fields + ",\n     \"qps_created\": " +
           number(named_value(r.setup, "rdma_qps_created")) +
           ", \"qps_live\": " + number(named_value(r.counters, "rdma_qps_live")) +
           ", \"mrs_live\": " + number(named_value(r.counters, "rdma_mrs_live")) + "}";
  }
  return out + (out.size() > 1 ? "\n  ]" : "]");
}

}  // namespace

Spread spread(std::vector<double> v) {
  if (v.empty()) return {};
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  const double median = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
  return {v.front(), median, v.back()};
}

void RankStats::set_fabric(const std::string& host_name, const std::string& summary) {
  host = host_name;
  fabric.clear();
  std::istringstream words(summary);
  for (std::string w; words >> w;) {
    const std::size_t eq = w.find('=');
    if (eq != std::string::npos && eq > 0) fabric.emplace_back(w.substr(0, eq), w.substr(eq + 1));
  }
}

std::string RankStats::serialize() const {
  std::string out;
  for (const auto& [k, t] : calls) {
    out += "call " + std::to_string(k.first) + " " + k.second + " " + std::to_string(t.calls) +
           " " + std::to_string(t.bytes) + " " + number(t.seconds) + "\n";
  }
  for (const Decision& d : decisions) {
    out += "decision " + std::to_string(d.comm_size) + " " + std::to_string(d.size_class) + " " +
           d.path + " " + number(d.agreement_seconds);
    for (const auto& [n, s] : d.medians_seconds) out += " " + n + "=" + number(s);
    out += "\n";
  }
  for (const auto& [n, v] : counters) out += "counter " + n + " " + number(v) + "\n";
  for (const auto& [n, v] : setup) out += "setup " + n + " " + number(v) + "\n";
  if (!fabric.empty()) {
    out += "fabric " + (host.empty() ? std::string("?") : host);
    for (const auto& [k, v] : fabric) out += " " + k + "=" + v;
    out += "\n";
  }
  return out;
}

RankStats RankStats::parse(const std::string& text) {
  RankStats r;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream in(line);
    std::string kind, name;
    in >> kind;
    bool ok = false;
    if (kind == "call") {
      int size = 0;
      CallTotals t;
      ok = static_cast<bool>(in >> size >> name >> t.calls >> t.bytes >> t.seconds);
      if (ok) r.calls[{size, name}] = t;
    } else if (kind == "decision") {
      Decision d;
      ok = static_cast<bool>(in >> d.comm_size >> d.size_class >> d.path >> d.agreement_seconds);
      for (std::string m; ok && in >> m;) {
        const std::size_t eq = m.find('=');
        ok = eq != std::string::npos;
        if (ok) d.medians_seconds.emplace_back(m.substr(0, eq), std::strtod(m.c_str() + eq + 1, nullptr));
      }
      if (ok) r.decisions.push_back(std::move(d));
    } else if (kind == "counter" || kind == "setup") {
      double v = 0;
      ok = static_cast<bool>(in >> name >> v);
      if (ok) (kind == "counter" ? r.counters : r.setup)[name] = v;
    } else if (kind == "fabric") {
      std::string rest;
      ok = static_cast<bool>(in >> name) && (std::getline(in, rest), true);
      if (ok) r.set_fabric(name, rest);
      ok = ok && !r.fabric.empty();
    }
    if (!ok) ++r.unreadable;
  }
  return r;
}

std::string render_job_report(const std::string& build, const std::vector<RankStats>& ranks) {
  unsigned unreadable = 0;
  for (const RankStats& r : ranks) unreadable += r.unreadable;
  return "{\n  \"schema\": \"mlxa2a-coll-stats/1\",\n  \"mlxa2a\": " + json_string(build) +
         ",\n  \"ranks\": " + std::to_string(ranks.size()) +
         ",\n  \"unreadable_lines\": " + std::to_string(unreadable) +
         ",\n  \"calls\": " + calls_json(ranks) +
         ",\n  \"tuning\": " + decisions_json(ranks) +
         ",\n  \"counters\": " + named_json(ranks, &RankStats::counters) +
         ",\n  \"setup\": " + named_json(ranks, &RankStats::setup) +
         ",\n  \"fabric\": " + fabric_json(ranks) + "\n}\n";
}

}  // namespace mlxa2a::core::stats
