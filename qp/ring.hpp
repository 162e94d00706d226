#pragma once
// Bookkeeping of one work ring (a send or a receive ring), the same for every NIC family:
// which entries are posted, which have a result, which results the user has taken, and the
// ring's failure. It touches no device memory; the family's queue (qp/mlx5/send_queue.hpp, ...)
// writes the entries and feeds this class what the completions say.
//
// The contract (docs/guide.md, "The queue pair contract"):
//  - `room`: how many more entries the ring takes; an entry's slot is free once its result has
//    been taken (not when the NIC completed it).
//  - results are taken in entry order. A completion naming a later entry completes every earlier
//    entry that had none (mlx5: a requester CQE covers the unsignaled entries before it; its
//    wqe_counter names the last one, rdma-core providers/mlx5/cq.c). A result that is known but not
// yet
//    due waits in its slot until every earlier one has been taken.
//  - failure: the failing entry carries its own error; every later entry, those posted after the
//    failure included, completes with the failure's error (flushed = true); the entries completed
//    before keep their result; a failed ring stays failed.
//
// Entry numbers are the unmasked producer count (64 bits: they never wrap); slot = number & mask.
// Hot path (push, complete_through, take): no allocation, no exception but for misuse, no log.
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <expected>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "rig/completion.hpp"

namespace rig::qp {

// Why an entry failed. `what` names the error (a static string of the family's table).
struct entry_error {
    std::string_view what;
    std::uint32_t syndrome = 0;   // the family's raw error code (mlx5: the CQE syndrome), 0 if none
    std::uint32_t vendor = 0;     // vendor syndrome (mlx5: vendor_err_synd)
    bool flushed = false;         // true: this entry did not fail itself, its ring had failed

    friend bool operator==(const entry_error&, const entry_error&) = default;
};

// What `poll` gives for one entry: the bytes it moved, or why it failed.
using entry_result = std::expected<std::uint32_t, entry_error>;

// What the caller said of an entry when posting it: its tag and operation (a completion group
// hands them back with the entry's result, rig/group.hpp).
// A receive's label also takes what its completion said of the message that consumed it: its
// immediate data, and op write_imm when a WRITE with immediate consumed it (note_immediate).
struct entry_label {
    std::uint64_t tag = 0;
    std::uint32_t immediate = 0;
    rig::operation op = rig::operation::send;
    bool signaled = true;   // false: a success is not handed out (take skips it)
    bool has_immediate = false;
};
static_assert(sizeof(entry_label) == 16, "a label stays two words: one store pair per post");
static_assert(offsetof(entry_label, tag) == 0 && offsetof(entry_label, immediate) == 8 &&
                  offsetof(entry_label, has_immediate) < 16,
              "ring::set_label writes the tag and then the rest as one 8-byte word");

class ring {
public:
    // `slots` (a power of two) entries of memory, at most `capacity` of them in flight (mlx5 uses
    // every slot; a bnxt ring keeps one free).
    ring(std::uint32_t slots, std::uint32_t capacity) : mask_(slots - 1), capacity_(capacity) {
        if (slots == 0 || (slots & (slots - 1)) != 0) {
            throw std::invalid_argument("ring: " + std::to_string(slots) +
                                        " slots is not a power of two");
        }
        if (capacity == 0 || capacity > slots) {
            throw std::invalid_argument("ring: capacity " + std::to_string(capacity) +
                                        " outside 1.." + std::to_string(slots));
        }
        bytes_.assign(slots, 0);
        labels_.assign(slots, entry_label{});
    }

    std::uint32_t slots() const noexcept { return mask_ + 1; }
    std::uint32_t capacity() const noexcept { return capacity_; }
    std::uint32_t room() const noexcept {
        return capacity_ - static_cast<std::uint32_t>(posted_ - taken_);
    }
    std::uint64_t posted() const noexcept { return posted_; }        // entries posted so far
    std::uint64_t completed() const noexcept { return completed_; }  // entries with a result
    std::uint64_t taken() const noexcept { return taken_; }          // results taken
    bool failed() const noexcept { return failed_; }
    // the failure's error as the entries after the failing one carry it (valid once failed())
    entry_error failure() const noexcept { return failure_; }

    // Misuse check for a post: throws before anything is written when the ring is full.
    void check_room() const {
        if (room() == 0) [[unlikely]] {
            refuse_full();
        }
    }

    // Records entry number posted() with `bytes` (its length: a send's or write's bytes, a
    // receive's capacity) and returns its number. Throws, changing nothing, if the ring is full.
    std::uint64_t push(std::uint32_t bytes) {
        check_room();
        const std::uint64_t k = posted_;
        push_checked(k, bytes);
        return k;
    }
    // The same after the caller's own check_room(), for entry k == posted() that it read before
    // writing the entry (a post checks before it writes; k kept in a register saves reloading
    // the count after the entry's stores, which the compiler must assume alias it).
    void push_checked(std::uint64_t k, std::uint32_t bytes) noexcept {
        bytes_[k & mask_] = bytes;
        posted_ = k + 1;
    }

    // Entry k's tag, operation and whether its success is handed out (k posted, or being posted).
    void label(std::uint64_t k, std::uint64_t tag, rig::operation op, bool signaled = true) noexcept {
        set_label(labels_[k & mask_], tag, op, signaled);
    }
    // Receive entry k (posted, without a result yet) was consumed by a message with immediate
    // data `imm`; `by`: receive for a SEND, write_imm for a WRITE with immediate.
    void note_immediate(std::uint64_t k, std::uint32_t imm, rig::operation by) noexcept {
        entry_label& l = labels_[k & mask_];
        l.immediate = imm;
        l.has_immediate = true;
        l.op = by;
    }
    // The label of entry n, valid while its slot is not posted again (after take(): the entry
    // just taken is taken() - 1).
    const entry_label& label_of(std::uint64_t n) const noexcept { return labels_[n & mask_]; }
    // Whether take() has a result to give now (an unsignalled success counts: taking it is
    // skipping it).
    bool due() const noexcept { return taken_ < completed_ || (failed_ && taken_ < posted_); }

    // A batch post's view (send_queue::post_batch): check room for n entries once, record each
    // entry's length through the raw slot array, then commit them all with one store. Entries
    // recorded but not committed are not posted (their slots are free).
    void check_room(std::uint32_t n) const {
        if (room() < n) [[unlikely]] {
            refuse_batch(n);
        }
    }
    std::uint32_t* slot_lengths() noexcept { return bytes_.data(); }
    entry_label* slot_labels() noexcept { return labels_.data(); }
    // A post's label of one slot: the tag, then immediate 0, op, signaled and has_immediate false
    // composed in a register as the label's second word, two stores in all. A label built whole
    // and copied went through the stack, one store-forwarding stall per entry, and field by field
    // g++ kept five stores (bench-post's "qp batch" rows). The spare last byte is stored as 0.
    static void set_label(entry_label& l, std::uint64_t tag, rig::operation op, bool signaled) noexcept {
        l.tag = tag;
        const std::uint64_t rest = label_byte(offsetof(entry_label, op), static_cast<std::uint8_t>(op)) |
                                   label_byte(offsetof(entry_label, signaled), signaled ? 1 : 0);
        std::memcpy(reinterpret_cast<std::byte*>(&l) + label_rest, &rest, sizeof rest);
    }
    std::uint32_t mask() const noexcept { return mask_; }
    void commit(std::uint64_t next) noexcept { posted_ = next; }

    // The entry whose number has low `bits` bits equal to `counter` among those posted and
    // without a result, or nothing if none (a completion that names no outstanding entry).
    std::optional<std::uint64_t> resolve(std::uint32_t counter, unsigned bits) const noexcept {
        const std::uint64_t m = (std::uint64_t{1} << bits) - 1;
        const std::uint64_t n = completed_ + ((counter - completed_) & m);
        if (n >= posted_) {
            return std::nullopt;
        }
        return n;
    }

    // Entries completed_ .. n completed successfully. `bytes`, if given, replaces entry n's
    // recorded length (a receive's message length). Ignored once the ring failed: what the NIC
    // says after a failure (its flush completions) changes no result.
    void complete_through(std::uint64_t n, std::optional<std::uint32_t> bytes) noexcept {
        if (failed_ || n < completed_ || n >= posted_) {
            return;
        }
        if (bytes) {
            bytes_[n & mask_] = *bytes;
        }
        completed_ = n + 1;
    }

    // Entry n failed with `e`: the entries before it completed successfully, it carries `e`,
    // and every later one (posted or still to come) completes with `e` as a flushed entry.
    void fail_at(std::uint64_t n, entry_error e) noexcept {
        if (failed_ || n < completed_ || n >= posted_) {
            return;
        }
        e.flushed = false;
        completed_ = n;
        failing_ = n;
        failed_ = true;
        failure_ = e;
        failure_.flushed = true;
        own_error_ = e;
    }

    // The ring failed with no entry of its own at fault (the NIC reported the queue pair's
    // failure, or the other ring of the queue pair failed): every entry without a result
    // completes with `e`. The caller first takes in every completion the NIC already wrote.
    void fail(entry_error e) noexcept {
        if (failed_) {
            return;
        }
        failing_ = ~std::uint64_t{0};
        failed_ = true;
        failure_ = e;
        failure_.flushed = true;
    }

    // The NIC flushed entry n (mlx5: a CQE with syndrome 0x5, "work request flushed in error"):
    // the queue pair failed, not this entry. The entries before n completed; the ring fails from
    // outside with `e` until the queue pair's own failure is known (adopt_failure).
    void fail_flushed_at(std::uint64_t n, entry_error e) noexcept {
        if (failed_ || n < completed_ || n >= posted_) {
            return;
        }
        completed_ = n;
        fail(e);
    }
    // Whether one of this ring's entries failed itself (fail_at), not the queue pair around it.
    bool failed_itself() const noexcept { return failed_ && failing_ != ~std::uint64_t{0}; }
    // A ring failed from outside takes the queue pair's failure as the error its entries carry
    // (seed: "the rest complete with the failure's Error"). Results already taken keep theirs.
    void adopt_failure(entry_error e) noexcept {
        if (failed_ && !failed_itself()) {
            failure_ = e;
            failure_.flushed = true;
        }
    }

    // The result of the oldest entry not yet taken, if it has one; nothing if it has none yet or
    // no entry is due. Taking it frees its slot.
    // An unsignalled entry that succeeded is skipped (its slot freed, nothing handed out).
    std::optional<entry_result> take() noexcept {
        while (taken_ < completed_ && !labels_[taken_ & mask_].signaled) [[unlikely]] {
            ++taken_;
        }
        if (taken_ == posted_) {
            return std::nullopt;
        }
        const std::uint64_t n = taken_;
        if (n < completed_) {
            ++taken_;
            return entry_result{bytes_[n & mask_]};
        }
        if (!failed_) {
            return std::nullopt;
        }
        ++taken_;
        if (n == failing_) {
            return entry_result{std::unexpect, own_error_};
        }
        return entry_result{std::unexpect, failure_};
    }

private:
    // The label's second word (set_label): `v` as the byte at `offset` of the label.
    static constexpr std::size_t label_rest = 8;
    static constexpr std::uint64_t label_byte(std::size_t offset, std::uint64_t v) noexcept {
        const std::size_t at = offset - label_rest;
        return v << (8 * (std::endian::native == std::endian::little ? at : 7 - at));
    }

    [[noreturn, gnu::cold]] void refuse_batch(std::uint32_t n) const {
        throw std::invalid_argument("ring full: a batch of " + std::to_string(n) + " entries, room for " +
                                    std::to_string(room()) + " more of " + std::to_string(capacity_));
    }
    [[noreturn, gnu::cold]] void refuse_full() const {
        throw std::invalid_argument("ring full: room for " + std::to_string(room()) +
                                    " more of " + std::to_string(capacity_) + " entries");
    }

    std::uint32_t mask_;
    std::uint32_t capacity_;
    std::uint64_t posted_ = 0;
    std::uint64_t completed_ = 0;
    std::uint64_t taken_ = 0;
    bool failed_ = false;
    std::uint64_t failing_ = ~std::uint64_t{0};   // the entry that failed itself, if any
    entry_error own_error_{};                      // its error
    entry_error failure_{};                        // what the others carry (flushed = true)
    std::vector<std::uint32_t> bytes_;             // per slot: the entry's length, then result
    std::vector<entry_label> labels_;              // per slot: what the caller said of it
};

}  // namespace rig::qp
