#pragma once
// The per-family control plane behind rig::nic (docs/architecture.md, "The family seam in qp/"):
// bring-up, the NIC-wide objects, regions' keys, queue pairs' firmware objects and their state
// changes, and teardown. One virtual call per API control call (each is one or a few firmware
// commands: a virtual call is nothing beside them); the data path never comes here (qp/state.hpp
// on_path).
//
// nic.cpp keeps what every family shares: the locks, the lists of regions and queue pairs, the
// misuse checks, the dirty-connect rule, the events' way to the waiters, close's order. A family
// keeps its own rule of what a firmware that stopped answering may still name (stranded(), and
// nothing more sent: mlx5 fails its command queue).
//
// Errors: a family's call returns the firmware's refusal with its message only ("INIT2RTR_QP
// (0x503): BAD_PARAM_ERR (0x3), syndrome 0x5a5a"); nic.cpp names the call in front (named()).
// The factory's errors are whole ("nic::open vfio-user:...: bring-up step ...").
#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "abi/pci_ids.hpp"
#include "driver/error.hpp"
#include "driver/function.hpp"
#include "rig/endpoint.hpp"
#include "rig/error.hpp"
#include "rig/info.hpp"
#include "rig/nic.hpp"

namespace rig::detail {

struct region_state;
struct qp_state;
struct group_state;

// What the family's event thread tells the NIC (beside the user's nic_options hooks, which the
// family calls itself: completion before the NIC's, the others after).
struct family_events {
    std::function<void(std::uint32_t qpn, std::uint8_t code)> qp_failure;  // code != 0: qp_state::nic_event
    std::function<void(std::uint32_t cqn)> completion;
    std::function<void()> fatal;
};

class control_plane {
public:
    virtual ~control_plane() = default;

    // Of the port, after bring-up.
    virtual std::array<std::byte, 6> mac() const = 0;
    virtual std::array<std::byte, 16> gid() const = 0;    // GID table entry 0
    virtual std::uint32_t path_mtu() const = 0;           // bytes: the largest RoCE MTU the port carries
    virtual std::uint8_t log_max_ring() const = 0;        // the largest ring a queue pair may have, log2

    // Registers r's memory (mapped at r.iova for r.bytes, rights r.rights): sets r.key and
    // r.family. Refused: r.memory is left for the NIC to unmap, or taken (stranded) when the
    // firmware may still name it.
    virtual result<void> register_memory(region_state& r) = 0;
    // Ok: the NIC unmaps and frees r.memory. Refused with r.memory left: still registered;
    // with r.memory taken (stranded): the registration is gone.
    virtual result<void> deregister_memory(region_state& r) = 0;

    // Creates the queue pair's firmware objects with rings of 2^log_ring entries, and fills
    // s.number, s.send_cq, s.receive_cq, s.family and s.path. With a group, both rings complete
    // to the group's CQ (no CQ of its own). Refused: gives back what it took (but what a
    // firmware that stopped answering may name).
    virtual result<void> make_qp(qp_state& s, std::uint8_t log_ring, const group_state* group) = 0;
    // A completion group's CQ of g.entries CQEs and its EQ on a free MSI-X vector: fills g.cq,
    // g.entries (as created), g.vector, g.event_fd, g.family and g.path. Refused: gives back what
    // it took.
    virtual result<void> make_group(group_state& g) = 0;
    // Destroys the group's CQ, then its EQ (no queue pair names the CQ any more), and frees its
    // vector. Refused while the firmware answers: kept until close.
    virtual result<void> release_group(group_state& g) = 0;
    // The largest CQ the NIC makes, log2.
    virtual std::uint8_t log_max_cq() const = 0;
    // The connect steps (docs/guide.md: ack timeout 14, retry 7, RNR retry 7).
    virtual result<void> to_reset(qp_state& s) = 0;
    virtual result<void> reset_to_init(qp_state& s) = 0;  // remote read and write allowed
    virtual result<void> init_to_rtr(qp_state& s, const endpoint& peer, std::uint32_t path_mtu_bytes) = 0;
    virtual result<void> rtr_to_rts(qp_state& s) = 0;     // sends from s.psn
    virtual result<qp_info> query(const qp_state& s) = 0;
    // Destroys what the firmware still holds of the queue pair (QP, then its CQs). Refused while
    // the firmware answers: all of it is kept (the CQs too) until close.
    virtual result<void> release_qp(qp_state& s) = 0;

    virtual std::vector<stranded_region> stranded() const = 0;
    virtual bool failed() const = 0;      // the firmware stopped answering, or the NIC failed
    virtual bool torn_down() const = 0;
    // Gives back the NIC-wide objects (when the firmware answers) and tears the function down;
    // completes locally on a firmware that stopped answering. Queue pairs and regions first.
    virtual result<void> close() = 0;
};

// A family's bring-up: its control plane over `fn`, or why not (a whole message).
using control_factory = result<std::unique_ptr<control_plane>> (*)(driver::function& fn, std::string_view where,
                                                                   const nic_options& options,
                                                                   family_events events);

// A family's control_factory body: its control plane made and started (`Control::start`), closed
// again when the start is refused (what it brought up goes back), or handed to the NIC.
template <class Control>
result<std::unique_ptr<control_plane>> start_control(std::unique_ptr<Control> c, std::string_view where,
                                                     const nic_options& options, family_events events) {
    if (auto r = c->start(where, options, std::move(events)); !r) {
        static_cast<void>(c->close());
        return std::unexpected(std::move(r.error()));
    }
    return std::unique_ptr<control_plane>(std::move(c));
}

// Destroys what the firmware still holds of a queue pair, in the order both families' firmware
// wants: the QP, then its CQs (a CQ a QP names is not destroyed). `destroy(object)` sends the
// object's destroy command and gives the API's error; objects not alive() are skipped; `forget(cq)`
// runs before each CQ's destroy. A refused QP destroy keeps everything (the QP still uses its CQs)
// until close; a refused CQ destroy is reported after the other CQ's was tried.
template <class Qp, class Cq, class Destroy, class Forget>
result<void> release_objects(Qp& qp, std::initializer_list<Cq*> cqs, Destroy&& destroy, Forget&& forget) {
    std::optional<error> first;
    if (qp.alive()) {
        if (auto r = destroy(qp); !r) {
            first = std::move(r.error());
            if (qp.alive()) {
                return std::unexpected(std::move(*first));
            }
        }
    }
    for (Cq* c : cqs) {
        if (c->alive()) {
            forget(*c);
            if (auto r = destroy(*c); !r && !first) {
                first = std::move(r.error());
            }
        }
    }
    if (first) {
        return std::unexpected(std::move(*first));
    }
    return {};
}

// "<call>: <message>"
inline error named(std::string_view call, error e) {
    e.message = std::string(call) + ": " + e.message;
    return e;
}
// "<call>: <PCI layer message>"
inline error os_error(std::string_view call, const driver::error& e) {
    return plain_error(error_kind::os, std::string(call) + ": " + e.message);
}

}  // namespace rig::detail
