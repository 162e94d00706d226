#pragma once
// One command as the firmware executes it: its gathered input, the output being built, and the
// failure path every command shares (status + syndrome, output zeroed). Private to the firmware
// model's command files (commands.cpp and the files that add command groups).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "abi/bits.hpp"
#include "abi/mlx5/ifc/cmd.hpp"
#include "sim/mlx5/firmware.hpp"
#include "sim/vfio_user/log.hpp"

namespace rig::sim::mlx5 {

namespace ifc = rig::mlx5::ifc;
using ifc::cmd_status;

struct firmware::call {
    std::span<const std::byte> in;
    std::size_t inlen;
    std::size_t outlen;
    std::vector<std::byte> out;
    std::uint16_t opcode;
    std::uint16_t op_mod;
    vfio_user::dma_space* dma;
    bool failed = false;

    void fail(cmd_status status, failure why) {
        std::fill(out.begin(), out.end(), std::byte{0});
        abi::set<ifc::mbox_out::status>(out, static_cast<std::uint8_t>(status));
        abi::set<ifc::mbox_out::syndrome>(out, syndrome_of(opcode, why));
        failed = true;
        log().debug("command {:#x} op_mod {:#x} failed: status {:#x} ({}), syndrome {:#x}", opcode, op_mod,
                    static_cast<unsigned>(status), ifc::to_string(status), syndrome_of(opcode, why));
    }
    // The command's fixed input and output fit in inlen and outlen.
    template <class In, class Out>
    bool sizes() {
        if (inlen < In::size_bytes) {
            fail(cmd_status::bad_inp_len_err, failure::input_too_short);
            return false;
        }
        if (outlen < Out::size_bytes) {
            fail(cmd_status::bad_outp_len_err, failure::output_too_short);
            return false;
        }
        return true;
    }
    std::uint64_t get(abi::field f) const { return abi::get(in, f); }
    void set(abi::field f, std::uint64_t v) { abi::set(out, f, v); }
};

template <class In, class Out, class Objects, class InUse>
void firmware::destroy_named(call& c, abi::field number, Objects& objects, InUse in_use) {
    if (!c.sizes<In, Out>() || !in_state(c, hca_state::initialized)) {
        return;
    }
    const auto n = static_cast<std::uint32_t>(c.get(number));
    if (!objects.contains(n)) {
        c.fail(cmd_status::bad_res_state_err, failure::unknown_object);
        return;
    }
    if (in_use(n)) {
        c.fail(cmd_status::bad_res_state_err, failure::object_in_use);
        return;
    }
    objects.erase(n);
}

}  // namespace rig::sim::mlx5
