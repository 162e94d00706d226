// The bnxt family's entry in rig-nicsim's table (sim/family.hpp): rig-nicsim's common options
// onto the bnxt function model's.
#include "sim/bnxt/function_model.hpp"
#include "sim/family.hpp"

namespace rig::sim::bnxt {

// Unset options keep the model's defaults. The MAC: rig-nicsim's 48-bit value, most
// significant byte first on the wire; 0 gives 02:52:49:47:42:k (locally administered).
std::unique_ptr<served_function> make_function(const common_options& c) {
    function_options o;
    o.function_index = c.index;
    if (c.mac != 0) {
        for (unsigned i = 0; i < 6; ++i) {
            o.firmware.mac[i] = static_cast<std::uint8_t>(c.mac >> (8 * (5 - i)));
        }
    } else {
        o.firmware.mac = {0x02, 0x52, 0x49, 0x47, 0x42, static_cast<std::uint8_t>(c.index)};
    }
    o.firmware.not_ready_time = c.init_time.value_or(o.firmware.not_ready_time);
    o.command_latency = c.command_latency;
    o.msix_vectors = c.msix_vectors.value_or(o.msix_vectors);
    o.fault = c.fault;
    o.on_ledger = c.on_ledger;
    return std::make_unique<served<function_model>>(o);
}

}  // namespace rig::sim::bnxt
