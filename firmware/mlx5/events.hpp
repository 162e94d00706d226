#pragma once
// The driver's asynchronous event queue: command completions by event, page requests, port
// changes, completion and QP events, and the health watch (kernel eq.c,
// rdma-core mlx5_vfio.c create_async_eqs, mlx5dv_vfio_process_events).
//
//   auto ev = events::start(fn, q, uar, handlers, {}, deadline).value();
//   ... commands on q now complete by event ...
//   ev->stop(stranded, deadline);
//
// start() wires MSI-X vector 0 to an eventfd, creates one EQ on `uar` (CREATE_EQ with
// event_bitmask CMD, PAGE_REQUEST, PORT_CHANGE, the QP and CQ error events, INTERNAL_ERROR;
// intr 0), arms it (be32 (eqn << 24) | ci at UAR + 0x40), starts the event thread and switches
// the command queue to event mode.
//
// The event thread blocks on the eventfd, with a timeout that brings it round for the health
// check (health.hpp) and that also finds EQEs whose interrupt was lost. It takes EQEs while
// their owner bit says software owns them, hands each to its handler, and writes the consumer
// index back (without arming every 0x80 entries, the EQ's spare room; with arming at the end).
// Handlers run on the event thread, except page_request, which runs on a worker thread of its
// own: its MANAGE_PAGES completes by a CMD event that the event thread must be free to take.
// Page requests are answered in the order they came. A command issued from a handler on the
// event thread is polled (command_queue::use_events), so it works, but holds up every event.
//
// On a fatal health report, an INTERNAL_ERROR event or a broken EQ, the command queue is failed
// (every waiting command returns error_kind::fatal, nothing more is sent) and handlers.fatal is
// called once; the event thread then stops taking events.
//
// Threads: start and stop from any one thread; the accessors from any thread.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "driver/function.hpp"
#include "firmware/mlx5/command_queue.hpp"
#include "firmware/mlx5/error.hpp"
#include "firmware/mlx5/health.hpp"
#include "firmware/mlx5/stranded.hpp"

namespace rig::firmware::mlx5 {

class eq;  // objects.hpp (kept out of this header: its namespace-wide `deadline` alias would
           // shadow-warn against parameters of that name in headers included after this one)

struct event_handlers {
    // PAGE_REQUEST: give (num_pages > 0) or take back (< 0) pages; run on the page worker, it
    // answers with command_queue::exec_page_command(MANAGE_PAGES ...).
    std::function<void(std::uint16_t function_id, std::int32_t num_pages)> page_request;
    // PORT_CHANGE: port number (1-based), up = sub_type ACTIVE.
    std::function<void(std::uint8_t port, bool up)> port_change;
    // COMP: a CQ attached to this EQ (cqc.c_eqn) has a new completion.
    std::function<void(std::uint32_t cqn)> completion;
    // PATH_MIG, COMM_EST, SQ_DRAINED, WQ_CATAS_ERROR, PATH_MIG_FAILED, WQ_INVAL_REQ_ERROR,
    // WQ_ACCESS_ERROR: the QP (or RQ/SQ) number and the EQE's event type.
    std::function<void(std::uint32_t qpn, std::uint8_t event_type)> qp_event;
    // health or EQ failure: the NIC is failed. Called once.
    std::function<void(const error&)> fatal;
};

struct events_options {
    // 2^8 = 256 EQEs: rdma-core's roundup_pow_of_two(32 + MLX5_NUM_SPARE_EQE 0x80).
    std::uint8_t log_eq_size = 8;
    // MSI-X vectors enabled: 0 is this EQ's, 1.. are left for completion EQs of their own (a
    // completion group's: rig/group.hpp), enabled once here because kernel VFIO cannot add
    // vectors to enabled MSI-X without dynamic allocation (VFIO_IRQ_INFO_NORESIZE). Capped by
    // what the function offers.
    std::uint32_t vectors = 1;
    health_options health;
    // Where a CREATE_EQ that timed out leaves the EQ's buffer (objects.hpp); null: start keeps
    // it in a list of its own that outlives the process's NICs.
    stranded_memory* stranded = nullptr;
};

// What the event thread has seen, for tests and rig-info.
struct event_counts {
    std::uint64_t interrupts = 0;  // eventfd wake-ups with a count
    std::uint64_t eqes = 0;
    std::uint64_t commands = 0;    // CMD EQEs
    std::uint64_t page_requests = 0;
    std::uint64_t port_changes = 0;
    std::uint64_t completions = 0;
    std::uint64_t qp_events = 0;
    std::uint64_t cq_errors = 0;
    std::uint64_t unknown = 0;
    std::uint64_t health_checks = 0;
};

class events {
public:
    static result<std::unique_ptr<events>> start(driver::function& fn, command_queue& q, std::uint32_t uar,
                                                 event_handlers handlers, const events_options& options,
                                                 command_queue::clock::time_point by);

    // Back to polling, the threads stopped, DESTROY_EQ (polled), MSI-X disabled. Idempotent.
    // Misuse: called from a handler (std::invalid_argument; it would wait for its own thread).
    // A DESTROY_EQ that times out or meets a failed NIC leaves the EQ's buffer in `stranded`;
    // one the firmware refuses leaves the EQ in place (a later stop tries again), the rest done.
    result<void> stop(stranded_memory& stranded, command_queue::clock::time_point by);

    // Not stopped: the threads are stopped and MSI-X disabled, and the EQ, still known to the
    // firmware, keeps its memory for the life of the process (objects.hpp).
    ~events();
    events(const events&) = delete;
    events& operator=(const events&) = delete;

    std::uint32_t eqn() const noexcept { return _eqn; }
    // The MSI-X vectors enabled (events_options::vectors, capped), and vector k's eventfd (k in
    // 1..vectors()-1 for completion EQs; the function owns it).
    std::uint32_t vectors() const noexcept { return static_cast<std::uint32_t>(_irq_fds.size()); }
    int vector_fd(std::uint32_t k) const { return _irq_fds.at(k); }
    std::uint32_t uar() const noexcept { return _uar; }
    bool running() const noexcept { return _thread.joinable(); }
    bool failed() const noexcept { return _fatal_called.load(); }
    event_counts counts() const;

private:
    events(driver::function& fn, command_queue& q, std::uint32_t uar, event_handlers handlers,
           const events_options& options);
    result<void> map_doorbell();
    result<void> ring_doorbell(bool arm);
    void run();
    void wake() noexcept;   // the thread drains now (the command queue's look_now)
    bool drain();
    void dispatch(const std::byte* eqe);
    void page_worker();
    void fail_nic(error e);
    void stop_threads();
    void count(std::uint64_t event_counts::*which);

    driver::function& _fn;
    command_queue& _q;
    std::uint32_t _uar;
    event_handlers _handlers;
    events_options _options;
    health_watcher _health;

    std::unique_ptr<eq> _eq;  // always set; alive() while the firmware knows it
    std::uint32_t _eqn = 0;
    bool _irqs_enabled = false;
    int _irq_fd = -1;    // MSI-X vector 0, owned by the function
    std::vector<int> _irq_fds;  // every vector enabled, in order (the function owns them)
    int _wake_fd = -1;   // ours: stop() wakes the event thread through it
    std::byte* _doorbell = nullptr;  // UAR + 0x40 in the mapped BAR, or null: region_write
    std::uint32_t _ci = 0;           // consumer index, event thread only

    std::thread _thread;
    bool _stopped = false;
    std::atomic<bool> _stopping{false};
    std::atomic<bool> _fatal_called{false};

    mutable std::mutex _lock;  // the page-request queue and the counts
    std::condition_variable _pages_cv;
    std::deque<std::pair<std::uint16_t, std::int32_t>> _page_requests;
    std::thread _pages;
    event_counts _counts;
};

}  // namespace rig::firmware::mlx5
