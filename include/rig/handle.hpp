#pragma once
// What an API handle (queue_pair, completion_group) holds: its NIC and the state the NIC owns
// for it. Moved, never copied: the NIC owns the state, and a moved-from handle is empty.
#include "rig/config.hpp"

#include <utility>

namespace rig {
class nic;
}

namespace rig::detail {

template <class State>
class handle {
protected:
    handle() = default;
    handle(rig::nic* n, State* s) noexcept : _nic(n), _state(s) {}
    handle(handle&& o) noexcept : _nic(std::exchange(o._nic, nullptr)), _state(std::exchange(o._state, nullptr)) {}
    handle& operator=(handle&& o) noexcept {
        _nic = std::exchange(o._nic, nullptr);
        _state = std::exchange(o._state, nullptr);
        return *this;
    }
    handle(const handle&) = delete;
    handle& operator=(const handle&) = delete;
    // Dropping a handle leaves what it names to the NIC's close().
    ~handle() = default;

    rig::nic* _nic = nullptr;
    State* _state = nullptr;
};

}  // namespace rig::detail
