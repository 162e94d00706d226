#pragma once
// Errors of the PCI layer: a value naming the call and the reason, never an abort.
//   "VFIO_IOMMU_MAP_DMA on 0000:3b:00.0: Cannot allocate memory"
#include <cerrno>
#include <cstring>
#include <expected>
#include <string>
#include <string_view>

namespace rig::driver {

struct error {
    std::string message;
    int os_errno = 0;   // the errno behind it, 0 when the reason is not the OS's
};

template <class T>
using result = std::expected<T, error>;

// "<call> on <who>: <strerror(err)>"
inline error os_error(std::string_view call, std::string_view who, int err) {
    std::string m(call);
    if (!who.empty()) {
        m += " on ";
        m += who;
    }
    m += ": ";
    m += std::strerror(err);
    return {std::move(m), err};
}

// "<call> on <who>: <reason>"
inline error fail(std::string_view call, std::string_view who, std::string_view reason, int err = 0) {
    std::string m(call);
    if (!who.empty()) {
        m += " on ";
        m += who;
    }
    m += ": ";
    m += reason;
    return {std::move(m), err};
}

}  // namespace rig::driver
