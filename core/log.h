// Logging and call tracing.
//
// Every line starts with "[mlxa2a <rank>:<pid>]" so lines of many ranks can
// be told apart. Output goes to stderr or to MLXA2A_LOG_FILE (opened on first
// use, with %r/%p/%h substituted). Writes are whole lines (one write(2) each),
// so lines of concurrent threads and processes do not interleave mid-line.
//
// Thread safety: configure()/set_rank() are called by the runtime during
// initialisation; enabled() and write() may be called from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

namespace mlxa2a::core::log {

enum class Level : std::uint8_t { Error, Warn, Info, Debug, Trace };

namespace detail {
extern std::atomic<int> g_level;
}

void configure(Level level, const std::string& file_pattern);
// Changes only the level (any thread; an MPI_T write of MLXA2A_LOG_LEVEL).
inline void set_level(Level level) {
  detail::g_level.store(static_cast<int>(level), std::memory_order_relaxed);
}
void set_rank(int rank);

inline bool enabled(Level l) {
  return static_cast<int>(l) <= detail::g_level.load(std::memory_order_relaxed);
}

// printf-style; a newline is added.
void write(Level l, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
// A trace line: printed whatever the log level (the caller checks the trace switch).
void trace(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

// Closes the log file, if any (at MPI_Finalize).
void shutdown();

// Rate limit for a message that can repeat on every call (e.g. every call on
// a communicator whose engine broke when a peer died): occurrences 1 to
// kBurst print, later ones only at powers of two, so 10^6 failing calls log
// about 20 lines. One instance per message site (static); thread-safe.
class Limiter {
 public:
  static constexpr std::uint64_t kBurst = 3;
  // The occurrence number (from 1) when this one should print, else 0.
  std::uint64_t admit() noexcept {
    const std::uint64_t k = n_.fetch_add(1, std::memory_order_relaxed) + 1;
    return k <= kBurst || (k & (k - 1)) == 0 ? k : 0;
  }

 private:
  std::atomic<std::uint64_t> n_{0};
};

}  // namespace mlxa2a::core::log

#define MLXA2A_LOG(level, ...)                                                  \
  do {                                                                          \
    if (::mlxa2a::core::log::enabled(::mlxa2a::core::log::Level::level))        \
      ::mlxa2a::core::log::write(::mlxa2a::core::log::Level::level, __VA_ARGS__); \
  } while (0)

// MLXA2A_LOG through a per-site Limiter; from the second occurrence on the
// line says how many times the message has come so far.
#define MLXA2A_LOG_LIMITED(level, fmt, ...)                                                 \
  do {                                                                                     \
    static ::mlxa2a::core::log::Limiter mlxa2a_limiter_;                                   \
    if (::mlxa2a::core::log::enabled(::mlxa2a::core::log::Level::level)) {                 \
      if (const std::uint64_t mlxa2a_k_ = mlxa2a_limiter_.admit(); mlxa2a_k_ == 1) {       \
        ::mlxa2a::core::log::write(::mlxa2a::core::log::Level::level, fmt, __VA_ARGS__);   \
      } else if (mlxa2a_k_ > 1) {                                                          \
        ::mlxa2a::core::log::write(::mlxa2a::core::log::Level::level,                      \
                                   fmt " (occurrence %llu; repeats are logged at powers of two)", \
                                   __VA_ARGS__, static_cast<unsigned long long>(mlxa2a_k_)); \
      }                                                                                    \
    }                                                                                      \
  } while (0)
