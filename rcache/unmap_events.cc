#include "rcache/unmap_events.h"

#include <dlfcn.h>
#include <sched.h>

#include <mutex>

#include "rcache/libc_patch.h"
#include "rcache/uffd_monitor.h"

namespace mlxa2a::rcache::detail {

void EventSink::push(uintptr_t start, uintptr_t end) noexcept {
  const uint64_t i = head_.fetch_add(1, std::memory_order_acq_rel);
  // Never overwrite an event the owner has not consumed: mark the loss instead, so
  // the owner flushes everything (correct, merely slow).
  if (i - tail_.load(std::memory_order_acquire) >= kRing) {
    overflow_.store(true, std::memory_order_release);
    return;
  }
  Slot& s = ring_[i % kRing];
  s.start.store(start, std::memory_order_relaxed);
  s.end.store(end, std::memory_order_relaxed);
  s.seq.store(i + 1, std::memory_order_release);
}

bool EventSink::wait_slot(uint64_t index) noexcept {
  // The producer is between its fetch_add and its seq store (a few instructions),
  // unless it found the ring full, in which case it raised overflow_.
  Slot& s = ring_[index % kRing];
  for (;;) {
    if (s.seq.load(std::memory_order_acquire) == index + 1) return true;
    if (overflow_.load(std::memory_order_acquire)) return false;
    sched_yield();
  }
}

void EventSink::widen_span(uintptr_t start, uintptr_t end) noexcept {
  if (start < lo_.load(std::memory_order_relaxed)) lo_.store(start, std::memory_order_seq_cst);
  if (end > hi_.load(std::memory_order_relaxed)) hi_.store(end, std::memory_order_seq_cst);
}

void EventSink::reset_span() noexcept {
  hi_.store(0, std::memory_order_seq_cst);
  lo_.store(UINTPTR_MAX, std::memory_order_seq_cst);
}

namespace {

constexpr int kMaxSinks = 64;
std::atomic<EventSink*> g_sinks[kMaxSinks];
// Hooks currently looking at a slot: unsubscribe waits for its slot to drain.
std::atomic<int> g_users[kMaxSinks];

std::mutex g_install_mu;
std::atomic<bool> g_patched{false};  // our libc patches installed
bool g_patch_lost = false;        // ... and later found overwritten
bool g_ucm = false;               // our handler registered with libucm
std::atomic<uint64_t> g_epoch{0};

// libucm's event API, declared here so that rcache builds without UCX headers
// (ucm/api/ucm.h, UCX 1.x ABI): UCM_EVENT_VM_UNMAPPED = bit 17, callbacks for it run
// before the memory is unmapped; event->vm_unmapped is { void *address; size_t size; }
// at offset 0 of the ucm_event_t union.
constexpr int kUcmEventVmUnmapped = 1 << 17;
struct UcmVmEvent {
  void* address;
  size_t size;
};
using UcmCallback = void (*)(int, void*, void*);
using UcmSetHandler = int (*)(int, int, UcmCallback, void*);

void on_ucm_event(int type, void* event, void*) {
  if (type != kUcmEventVmUnmapped || event == nullptr) return;
  const auto* e = static_cast<const UcmVmEvent*>(event);
  const auto start = reinterpret_cast<uintptr_t>(e->address);
  publish_unmap(start, start + e->size);
}

// Caller holds g_install_mu.
std::string attach_ucm(bool load_if_absent) {
  if (g_ucm) return {};
  void* lib = dlopen("libucm.so.0", RTLD_NOW | RTLD_GLOBAL | RTLD_NOLOAD);
  if (lib == nullptr && load_if_absent) {
    // libucm needs symbols of libucs (ucs_load_modules), which depends on libucm:
    // loading libucs brings both in, in the right order.
    if (dlopen("libucs.so.0", RTLD_NOW | RTLD_GLOBAL) != nullptr) {
      lib = dlopen("libucm.so.0", RTLD_NOW | RTLD_GLOBAL | RTLD_NOLOAD);
    }
  }
  if (lib == nullptr) {
    const char* why = dlerror();
    return std::string("libucm.so.0 is not available") + (why ? std::string(": ") + why : "");
  }
  auto set = reinterpret_cast<UcmSetHandler>(dlsym(lib, "ucm_set_event_handler"));
  if (set == nullptr) return "libucm has no ucm_set_event_handler";
  // Priority: any value works for a read-only VM_UNMAPPED observer.
  const int status = set(kUcmEventVmUnmapped, 1000, on_ucm_event, nullptr);
  if (status != 0) {
    return "ucm_set_event_handler(VM_UNMAPPED) failed with status " + std::to_string(status) +
           " (UCX_MEM_EVENTS=no?)";
  }
  g_ucm = true;  // the handle stays open for the life of the process
  return {};
}

bool ucm_loaded() {
  void* lib = dlopen("libucm.so.0", RTLD_NOW | RTLD_NOLOAD);
  if (lib == nullptr) return false;
  dlclose(lib);  // drops only the reference NOLOAD added
  return true;
}

}  // namespace

void publish_unmap(uintptr_t start, uintptr_t end) noexcept {
  if (end <= start) return;
  for (int i = 0; i < kMaxSinks; ++i) {
    if (g_sinks[i].load(std::memory_order_relaxed) == nullptr) continue;
    g_users[i].fetch_add(1, std::memory_order_seq_cst);
    EventSink* sink = g_sinks[i].load(std::memory_order_seq_cst);
    if (sink != nullptr && sink->wants(start, end)) sink->push(start, end);
    g_users[i].fetch_sub(1, std::memory_order_release);
  }
}

std::string subscribe(EventSink* sink, Invalidation mode, Invalidation* effective) {
  std::lock_guard<std::mutex> lock(g_install_mu);
  std::string err;
  const Invalidation requested = mode;
  switch (mode) {
    case Invalidation::kNone:
      break;
    case Invalidation::kUcm:
      err = attach_ucm(/*load_if_absent=*/true);
      break;
    case Invalidation::kPatch:
      err = install_libc_patches();
      if (err.empty()) g_patched = true;
      break;
    case Invalidation::kStrict:
    case Invalidation::kAuto:
      // One set of hooks per process: when UCX's libucm is present it already patches
      // (or relocates) these entry points, and a second patch on top would cut one of
      // us off. So share its events; patch ourselves only when it is absent.
      if (g_ucm || ucm_loaded()) {
        err = attach_ucm(false);
        mode = Invalidation::kUcm;
        if (!err.empty()) {
          // libucm is here but refuses (UCX_MEM_EVENTS=no, hook mode none): then it did
          // not patch either, and ours are safe (install refuses if someone did).
          const std::string patch_err = install_libc_patches();
          if (patch_err.empty()) {
            g_patched.store(true, std::memory_order_release);
            err.clear();
            mode = Invalidation::kPatch;
          } else {
            err += "; " + patch_err;
          }
        }
      } else {
        err = install_libc_patches();
        if (err.empty()) g_patched = true;
        mode = Invalidation::kPatch;
      }
      break;
  }
  if (err.empty() && requested == Invalidation::kStrict) {
    err = start_uffd_monitor();
    mode = Invalidation::kStrict;
  }
  if (!err.empty()) return "rcache invalidation '" + std::string(to_string(mode)) + "': " + err;
  *effective = mode;
  if (mode == Invalidation::kNone) return {};
  for (int i = 0; i < kMaxSinks; ++i) {
    EventSink* expected = nullptr;
    if (g_sinks[i].compare_exchange_strong(expected, sink, std::memory_order_seq_cst)) return {};
  }
  return "rcache: more than 64 live caches";
}

void unsubscribe(EventSink* sink) noexcept {
  for (int i = 0; i < kMaxSinks; ++i) {
    EventSink* expected = sink;
    if (g_sinks[i].compare_exchange_strong(expected, nullptr, std::memory_order_seq_cst)) {
      while (g_users[i].load(std::memory_order_acquire) != 0) sched_yield();
      return;
    }
  }
}

uint64_t mechanism_epoch() noexcept { return g_epoch.load(std::memory_order_acquire); }

void check_mechanisms() noexcept {
  if (!g_patched.load(std::memory_order_acquire)) return;
  std::lock_guard<std::mutex> lock(g_install_mu);
  if (!g_patched || g_patch_lost || libc_patches_intact()) return;
  // Someone (typically libucm loaded after us) overwrote our jumps: events may have been
  // missed. Switch to libucm's events if it is here now, and make every cache flush.
  g_patch_lost = true;
  (void)attach_ucm(false);
  g_epoch.fetch_add(1, std::memory_order_acq_rel);
}

bool mechanism_ok(Invalidation effective) noexcept {
  if (effective != Invalidation::kPatch && effective != Invalidation::kStrict) return true;
  std::lock_guard<std::mutex> lock(g_install_mu);
  return !g_patch_lost || g_ucm;
}

}  // namespace mlxa2a::rcache::detail
