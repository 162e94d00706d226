#pragma once
// A fault a function model suffers by itself, family-neutral (rig-nicsim --fault-*): once
// `after_commands` firmware commands have completed since the last reset, the firmware goes
// silent, fails fatally, fails the next command of an opcode with a chosen status, or the
// function dies (reads all ones). Every reset re-arms it, so a driver meets it again on each
// bring-up. The numbers are plain: their meaning (opcode and status space, what "fatal" reports)
// is the family's, named by its fault_space:
//   mlx5  cmdq: opcode 16-bit, status 8-bit (cmd_status), syndrome 32-bit; fatal: the health
//         syndrome (mlx5_ifc.h initial_seg health_syndrome, 1..255)
//   bnxt  hwrm: req_type 16-bit, error_code 16-bit, syndrome = cmd_err 8-bit (bnxt_hsi.h
//         hwrm_err_output); rcfw: opcode 8-bit, CREQ status 8-bit, no syndrome (roce_hsi.h
//         cmdq_base, creq_base); fatal: the bnxt model's choice (sim/bnxt)
//
//   const pci::fault_space& space = ...;            // the family's
//   auto f = pci::parse_fault_fail("hwrm:0x193:0x2", space);   // expected<command_failure, string>
//   pci::fault_arm arm(plan);  arm.rearm();  if (auto k = arm.strike(completed)) ...
#include <cstdint>
#include <expected>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace rig::sim::pci {

enum class fault_kind : std::uint8_t { none, silence, fatal, fail_command, die };

// One firmware channel of a family, as --fault-fail names it.
struct fault_channel {
    std::string_view name;          // "cmdq", "hwrm", "rcfw"
    std::string_view opcode_name;   // in messages: "opcode", "req_type"
    std::uint32_t max_opcode;
    std::string_view status_name;   // "status", "error_code"
    std::uint32_t max_status;       // statuses 1..max (0 is success on every channel)
    std::uint32_t max_syndrome;     // 0: the channel has no syndrome (a third number is refused)
    std::uint32_t default_syndrome;  // when none is given
};

// What a family's faults mean: its channels (the first is the main one, the one a bare
// OP:STATUS names) and the fatal kind's argument.
struct fault_space {
    std::string_view family;                  // in messages: "mlx5"
    std::span<const fault_channel> channels;  // at least one
    std::string_view fatal_name;              // "health syndrome"
    std::uint32_t min_fatal;
    std::uint32_t max_fatal;
};

// fail's argument: the next command of `opcode` on channel `channel` (an index into the
// family's channels) fails with `status` and `syndrome` and does not run.
struct command_failure {
    unsigned channel = 0;
    std::uint32_t opcode = 0;
    std::uint32_t status = 0;
    std::uint32_t syndrome = 0;
};

struct fault_plan {
    fault_kind what = fault_kind::none;
    std::uint32_t after_commands = 0;
    std::uint32_t fatal_code = 0;  // fatal: the family's argument (mlx5: health syndrome)
    command_failure fail;          // fail_command
};

// "[CHANNEL:]OP:STATUS[:SYNDROME]", numbers decimal or 0x hex. CHANNEL is one of the family's
// channel names; without it the main channel. The error names what was wrong, for a message
// "bad value for --fault-fail: 'TEXT' (ERROR)": e.g. "mlx5 has no channel 'hwrm' (cmdq)",
// "req_type '0x10000' is out of range 0..0xffff", "expected [CHANNEL:]OP:STATUS[:SYNDROME]".
std::expected<command_failure, std::string> parse_fault_fail(std::string_view text, const fault_space& space);
// The fatal kind's argument, within the family's range ("health syndrome '0' is out of range 1..0xff").
std::expected<std::uint32_t, std::string> parse_fault_fatal(std::string_view text, const fault_space& space);

// A plan armed at every reset; it strikes once, the first time it is asked with
// `completed` (commands since the reset) at or past after_commands.
// (A family whose options hold the plan in its own typed form arms it with kind and count.)
class fault_arm {
public:
    fault_arm() = default;
    fault_arm(fault_kind what, std::uint32_t after_commands) : _what(what), _after(after_commands) {}
    explicit fault_arm(const fault_plan& p) : fault_arm(p.what, p.after_commands) {}
    void rearm() noexcept { _struck = false; }
    bool struck() const noexcept { return _struck; }
    // The kind that strikes now, once per arm; nullopt: none, not yet, or struck already.
    std::optional<fault_kind> strike(std::uint64_t completed) noexcept;

private:
    fault_kind _what = fault_kind::none;
    std::uint32_t _after = 0;
    bool _struck = false;
};

}  // namespace rig::sim::pci
