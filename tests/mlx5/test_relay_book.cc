// RelayBook (core/mlx5/relay_book.h), the relay bookkeeping RC and DC share,
// without verbs or processes: a notice is placed where the write would have
// put its bytes and header and counted once; a copy whose write landed after
// all (counted by the CQ drain that precedes every notice) is dropped
// unplaced; a gap in a partner's sequence, a notice from a non-partner and a
// partner's kAbort fail; settled() wants both directions of the round.
#include <gtest/gtest.h>

#include <cstring>
#include <deque>
#include <functional>
#include <string>
#include <vector>

#include "core/mlx5/relay_book.h"

namespace mlxa2a::mlx5 {
namespace {

constexpr std::size_t kMembers = 3;
constexpr std::size_t kArea = 4096;

// Notices queued by the test, as if sent by partners.
struct QueueRelay final : hier::Relay {
  struct Item {
    int member;
    hier::RelayNotice notice;
    std::string bytes;
  };
  std::deque<Item> in;
  std::vector<Item> out;  // what the book sent
  Status send(int member, const hier::RelayNotice& n, const char* data) noexcept override {
    out.push_back({member, n, std::string(data ? data : "", data ? n.bytes : 0)});
    return Status::ok;
  }
  Status next(int* member, hier::RelayNotice* n, bool* got) noexcept override {
    *got = !in.empty();
    if (*got) {
      *member = in.front().member;
      *n = in.front().notice;
    }
    return Status::ok;
  }
  Status receive(int member, char* dst, std::size_t bytes) noexcept override {
    if (in.empty() || in.front().member != member || in.front().bytes.size() != bytes) {
      return Status::net_failed;
    }
    if (dst) std::memcpy(dst, in.front().bytes.data(), bytes);
    in.pop_front();
    return Status::ok;
  }
};

struct Host final : RelayHost {
  std::function<void()> on_drain = [] {};
  int drains = 0;
  Status poll_cq() noexcept override { return Status::ok; }
  void drain() noexcept override {
    ++drains;
    on_drain();
  }
  bool path_failed() noexcept override { return false; }
  Status relay_failed() noexcept override { return Status::ok; }
  bool settled() const noexcept override { return true; }
  bool partner(std::size_t m) const noexcept override { return m != 0; }  // we are member 0
  void idle() noexcept override {}
  void keepalive() noexcept override {}
  Status abort_pending(Status st) noexcept override { return st; }
  Status fail(Status st) noexcept override { return st; }
};

struct Book {
  std::vector<char> in[2], out[2];
  hier::StageAreas areas;
  Slot slot;
  Host host;
  QueueRelay* relay = nullptr;
  std::unique_ptr<RelayBook> book;
  Book() {
    for (int p = 0; p < 2; ++p) {
      in[p].assign(kArea, 0);
      out[p].assign(kArea, 0);
      areas.in[p] = in[p].data();
      areas.out[p] = out[p].data();
    }
    areas.bytes = kArea;
    for (CounterRow& r : slot.from) r.reset(kMembers);
    slot.sent_to.reset(kMembers);
    book = std::make_unique<RelayBook>(host, slot, areas, "TEST", "path");
    auto r = std::make_unique<QueueRelay>();
    relay = r.get();
    book->set_relay(std::move(r));
  }
  void queue(int member, std::uint64_t seq, int parity, std::size_t offset, std::string bytes,
             bool head = false) {
    hier::RelayNotice n;
    n.parity = static_cast<std::uint32_t>(parity);
    n.seq = seq;
    n.offset = offset;
    n.bytes = bytes.size();
    if (head) {
      n.has_head = 1;
      n.head_offset = 2048;
      n.head.message_bytes = bytes.size();
    }
    relay->in.push_back({member, n, std::move(bytes)});
  }
};

TEST(RelayBook, PlacesANoticeAndCountsItOnce) {
  Book b;
  b.queue(1, 1, 1, 100, "hello", true);
  ASSERT_EQ(b.book->take_notices(), Status::ok);
  EXPECT_EQ(std::string(b.out[1].data() + 100, 5), "hello");
  hier::Header h;
  std::memcpy(&h, b.out[1].data() + 2048, sizeof h);
  EXPECT_EQ(h.message_bytes, 5u);
  EXPECT_EQ(b.slot.from[1][1].load(), 1u);
  EXPECT_EQ(b.slot.arrived[1].load(), 1u);
  EXPECT_EQ(b.slot.from[0][1].load(), 0u);  // the other parity untouched
  EXPECT_TRUE(b.book->degraded());
  EXPECT_GE(b.host.drains, 1);  // the CQ is drained before a notice is taken
}

TEST(RelayBook, DropsACopyWhoseWriteLandedAfterAll) {
  Book b;
  // The write of message 1 landed and its completion is in our CQ: the
  // drain before the notice counts it, so the relayed copy is a duplicate.
  b.host.on_drain = [&] {
    if (b.slot.from[0][2].load() == 0) {
      b.slot.from[0][2].fetch_add(1);
      b.slot.arrived[0].fetch_add(1);
      std::memcpy(b.out[0].data() + 8, "RDMA", 4);
    }
  };
  b.queue(2, 1, 0, 8, "copy");
  b.queue(2, 2, 0, 16, "next");  // the next one is taken as usual
  ASSERT_EQ(b.book->take_notices(), Status::ok);
  EXPECT_EQ(std::string(b.out[0].data() + 8, 4), "RDMA");  // not overwritten
  EXPECT_EQ(std::string(b.out[0].data() + 16, 4), "next");
  EXPECT_EQ(b.slot.from[0][2].load(), 2u);
  EXPECT_EQ(b.slot.arrived[0].load(), 2u);
  EXPECT_TRUE(b.relay->in.empty());  // the duplicate's bytes were read off
}

TEST(RelayBook, FailsOnAGapANonPartnerAndAnAbort) {
  {
    Book b;
    b.queue(1, 2, 0, 0, "x");  // message 1 never came
    EXPECT_EQ(b.book->take_notices(), Status::net_failed);
  }
  {
    Book b;
    b.queue(0, 1, 0, 0, "x");  // ourselves: not a partner
    EXPECT_EQ(b.book->take_notices(), Status::net_failed);
  }
  {
    Book b;
    b.queue(1, 1, 0, kArea - 2, "xyz");  // past the out-area
    EXPECT_EQ(b.book->take_notices(), Status::net_failed);
  }
  {
    Book b;
    b.queue(1, 0, 0, 0, "");
    b.relay->in.back().notice.kind = hier::RelayNotice::kAbort;
    EXPECT_EQ(b.book->take_notices(), Status::net_failed);
  }
}

TEST(RelayBook, SendsTheRoundsMessageAndAbortsToPartners) {
  Book b;
  RelayPeer p;
  p.member = 2;
  p.posted[1] = 3;
  p.rdma_posted = 2;
  char bytes[4] = {'a', 'b', 'c', 'd'};
  hier::Header head;
  head.bytes_per_peer = 4;
  p.msg = hier::Message{};
  p.msg.bytes = 4;
  p.msg.remote_offset = 64;
  p.msg.parity = 1;
  p.msg.head_send = &head;
  p.msg.head_remote_offset = 1024;
  const std::uint64_t before = RelayBook::relayed_count();
  ASSERT_EQ(b.book->send(p, bytes), Status::ok);
  EXPECT_TRUE(p.relayed_now);
  EXPECT_EQ(RelayBook::relayed_count(), before + 1);
  ASSERT_EQ(b.relay->out.size(), 1u);
  const QueueRelay::Item& it = b.relay->out[0];
  EXPECT_EQ(it.member, 2);
  EXPECT_EQ(it.notice.seq, 3u);  // the partner's sequence at that parity
  EXPECT_EQ(it.notice.parity, 1u);
  EXPECT_EQ(it.notice.offset, 64u);
  EXPECT_EQ(it.notice.has_head, 1u);
  EXPECT_EQ(it.notice.head_offset, 1024u);
  EXPECT_EQ(it.bytes, "abcd");
  // Settled once its message came (from >= posted) - ours went by relay.
  EXPECT_FALSE(b.book->settled(p, 1));
  b.slot.from[1][2].store(3);
  EXPECT_TRUE(b.book->settled(p, 1));
  // By RDMA, it also waits for our write's completion.
  p.relayed_now = false;
  EXPECT_FALSE(b.book->settled(p, 1));
  b.slot.sent_to[2].store(2);
  EXPECT_TRUE(b.book->settled(p, 1));
  b.book->abort();
  ASSERT_EQ(b.relay->out.size(), 3u);  // members 1 and 2, not ourselves
  EXPECT_EQ(b.relay->out[1].notice.kind, hier::RelayNotice::kAbort);
  EXPECT_EQ(b.relay->out[1].member, 1);
  EXPECT_EQ(b.relay->out[2].member, 2);
}

}  // namespace
}  // namespace mlxa2a::mlx5
