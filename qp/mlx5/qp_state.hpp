#pragma once
// What the NIC keeps for each region and queue pair (qp/nic.hpp owns them; region and
// queue_pair are handles). mlx5: the firmware objects (firmware/mlx5/objects.hpp) and the data
// path over their memory (qp/mlx5/*_queue.hpp). Internal to qp/.
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

// abi/mlx5/ifc/*.hpp before qp/mlx5/*: the ifc headers name rig::abi as `abi` from inside
// rig::mlx5, which finds rig::mlx5::abi (abi/mlx5/entry.hpp, ...) once that is declared. Files
// that include this one include it before any abi/mlx5 data-path header.
#include "abi/mlx5/ifc/eqe.hpp"
#include "driver/dma_memory.hpp"
#include "firmware/mlx5/objects.hpp"
#include "qp/endpoint.hpp"
#include "qp/mlx5/completion_queue.hpp"
#include "qp/mlx5/receive_queue.hpp"
#include "qp/mlx5/send_queue.hpp"
#include "qp/region.hpp"

namespace rig::detail {

struct region_state {
    driver::dma_memory memory;
    std::uint64_t iova = 0;
    std::size_t bytes = 0;
    rig::access rights = rig::access::local;
    firmware::mlx5::mkey key;
    bool registered = false;   // false once deregistered (or stranded at close)
};

struct qp_state {
    firmware::mlx5::cq send_cq;
    firmware::mlx5::cq receive_cq;
    firmware::mlx5::qp object;
    std::optional<qp::mlx5::send_queue> sq;
    std::optional<qp::mlx5::receive_queue> rq;
    std::optional<qp::mlx5::completion_queue> scq;
    std::optional<qp::mlx5::completion_queue> rcq;
    std::uint32_t psn = 0;
    bool connected = false;
    bool dirty = false;       // a connect stopped part-way: the next one resets first
    bool destroyed = false;   // destroy() was called (Ok or not): the handle is dead
    // Set by the NIC's event thread: the failure event (WQ_CATAS_ERROR, WQ_INVAL_REQ_ERROR,
    // WQ_ACCESS_ERROR, PATH_MIG_FAILED) the NIC reported for this queue pair; 0: none. The data
    // path reads it after taking in the CQEs (seed: "a queue pair fails ... when the NIC reports
    // its failure").
    std::atomic<std::uint8_t> nic_event{0};
    // COMP events of the send and receive CQs, counted by the NIC's event thread; the
    // `_seen` counts are the waiting thread's: each event it takes in moves the CQ's arm
    // sequence number on before the next arm (rdma-core mlx5_cq_event: arm_sn++), so the
    // completion_queue itself is touched by one thread only.
    std::atomic<std::uint32_t> send_events{0};
    std::atomic<std::uint32_t> receive_events{0};
    std::uint32_t send_events_seen = 0;
    std::uint32_t receive_events_seen = 0;
};

}  // namespace rig::detail
