#include "core/log.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdarg>
#include <cstdio>
#include <mutex>

namespace mlxa2a::core::log {

namespace detail {
std::atomic<int> g_level{static_cast<int>(Level::Warn)};
}

namespace {

std::mutex g_mutex;  // guards the fields below (rare: set-up and file open)
std::string g_pattern;
std::atomic<int> g_rank{-1};
int g_fd = -1;  // -1: not opened yet; 2 when writing to stderr

std::string host_name() {
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  return host;
}

std::string expand(const std::string& pattern) {
  std::string out;
  for (std::size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] == '%' && i + 1 < pattern.size()) {
      const char c = pattern[++i];
      if (c == 'r') out += g_rank.load() >= 0 ? std::to_string(g_rank.load()) : std::string("x");
      else if (c == 'p') out += std::to_string(getpid());
      else if (c == 'h') out += host_name();
      else if (c == '%') out += '%';
      else (out += '%') += c;
    } else {
      out += pattern[i];
    }
  }
  return out;
}

int output_fd() {
  std::lock_guard lock(g_mutex);
  if (g_fd >= 0) return g_fd;
  g_fd = 2;
  if (!g_pattern.empty()) {
    const std::string path = expand(g_pattern);
    const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd >= 0) {
      g_fd = fd;
    } else {
      dprintf(2, "[mlxa2a] warn: cannot open MLXA2A_LOG_FILE %s; logging to stderr\n",
              path.c_str());
    }
  }
  return g_fd;
}

constexpr const char* kLevelNames[] = {"error", "warn", "info", "debug", "trace"};

void vwrite(const char* tag, const char* fmt, va_list ap) {
  char line[2048];
  int n = snprintf(line, sizeof line, "[mlxa2a %d:%d] %s: ", g_rank.load(std::memory_order_relaxed), static_cast<int>(getpid()),
                   tag);
  if (n < 0) return;
  const int m = vsnprintf(line + n, sizeof line - static_cast<std::size_t>(n) - 1, fmt, ap);
  if (m < 0) return;
  n = std::min<int>(n + m, static_cast<int>(sizeof line) - 2);
  line[n++] = '\n';
  const int fd = output_fd();
  for (int off = 0; off < n;) {
    const ssize_t w = ::write(fd, line + off, static_cast<std::size_t>(n - off));
    if (w <= 0) break;
    off += static_cast<int>(w);
  }
}

}  // namespace

void configure(Level level, const std::string& file_pattern) {
  detail::g_level.store(static_cast<int>(level), std::memory_order_relaxed);
  std::lock_guard lock(g_mutex);
  if (g_pattern != file_pattern && g_fd > 2) {
    close(g_fd);
    g_fd = -1;
  }
  g_pattern = file_pattern;
}

void set_rank(int rank) { g_rank.store(rank); }

void write(Level l, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vwrite(kLevelNames[static_cast<int>(l)], fmt, ap);
  va_end(ap);
}

void trace(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vwrite("coll", fmt, ap);
  va_end(ap);
}

void shutdown() {
  std::lock_guard lock(g_mutex);
  if (g_fd > 2) close(g_fd);
  g_fd = -1;
}

}  // namespace mlxa2a::core::log
