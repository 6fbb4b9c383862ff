// Where mlxa2a's MPI_T variables sit among the MPI's own (docs/mpit.md).
//
// A tool sees one index space per kind (control or performance variables):
// the MPI's own indices below `base`, then ours as one block, then whatever
// the MPI adds later, shifted past our block. `base` is the MPI's count when
// a tool first asks, so indices a tool has already seen never change (MPI_T
// only ever adds variables) and ours never collide with the MPI's new ones.
//
// Thread safety: every method may be called from any thread; the base is
// fixed once, by whichever thread asks first.
#pragma once

#include <atomic>

namespace mlxa2a::core::mpi {

class MpitIndexSpace {
 public:
  explicit MpitIndexSpace(int ours) : ours_(ours) {}

  // The tool's count, given the MPI's count now (fixes the base if unset).
  int count(int mpi_count) noexcept {
    fix(mpi_count);
    return mpi_count + ours_;
  }

  // What a tool's index names: ours (index into our table) or the MPI's.
  struct Where {
    bool ours = false;
    int index = -1;  // -1: no such variable
  };
  Where locate(int view, int mpi_count) noexcept {
    const int base = fix(mpi_count);
    if (view < 0) return {};
    if (view < base) return {false, view};
    if (view < base + ours_) return {true, view - base};
    const int mpi = view - ours_;
    return mpi < mpi_count ? Where{false, mpi} : Where{};
  }

  // The tool's index of the MPI's variable `mpi` and of our variable `i`.
  int view_of_mpi(int mpi, int mpi_count) noexcept {
    const int base = fix(mpi_count);
    return mpi < base ? mpi : mpi + ours_;
  }
  int view_of_ours(int i, int mpi_count) noexcept { return fix(mpi_count) + i; }

 private:
  int fix(int mpi_count) noexcept {
    int base = base_.load(std::memory_order_acquire);
    if (base >= 0) return base;
    // The first count seen wins; later (larger) counts keep it.
    return base_.compare_exchange_strong(base, mpi_count, std::memory_order_acq_rel) ? mpi_count
                                                                                     : base;
  }

  const int ours_;
  std::atomic<int> base_{-1};
};

}  // namespace mlxa2a::core::mpi
