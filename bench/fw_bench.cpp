// bench-fw: the mlx5 firmware path against the device model served in this process over
// vfio-user: bring-up time to a usable NIC (every step of hca::bring_up, READY included) and
// teardown time, medians of N; then commands per second for cheap commands: NOP (16 bytes in
// and out, no mailbox), QUERY_QP of a live RC QP (the figure: 0x188 bytes out, one
// output mailbox block) and QUERY_HCA_CAP (4 KiB out: 8 output mailbox blocks), in polling
// mode and in event mode (CMD EQE + MSI-X eventfd). Then the same for bnxt beside it (the
// BCM57508 model, firmware/bnxt): bring-up to READY (HWRM, VER_GET .. the CREQ, then the RoCE
// channel to ADD_GID) and teardown, HWRM and RCFW commands per second, the RoCE channel polled
// and in event mode (the CREQ's MSI-X vector);
// and HWRM requests per second for cheap requests: VER_GET (24 bytes in, 176 out) and
// FUNC_QCAPS (24 in, 144 out), polling the response (HWRM has no event mode before an async
// completion ring). Prints figures, asserts nothing.
//
//   meson compile -C build bench-fw   (or: build/bench/fw-bench [bring-ups] [seconds per figure])
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include <stdlib.h>

#include "abi/bits.hpp"
#include "bench/bench_access.hpp"
#include "abi/mlx5/ifc.hpp"
#include "driver/function.hpp"
#include "abi/bnxt/hwrm.hpp"
#include "firmware/bnxt/device.hpp"
#include "firmware/mlx5/events.hpp"
#include "firmware/mlx5/hca.hpp"
#include "firmware/mlx5/objects.hpp"
#include "sim/bnxt/function_model.hpp"
#include "sim/mlx5/function_model.hpp"
#include "sim/vfio_user/server.hpp"

namespace {

namespace ifc = rig::mlx5::ifc;
namespace fw = rig::firmware::mlx5;
using clk = std::chrono::steady_clock;

[[noreturn]] void die(const std::string& why) {
    std::fprintf(stderr, "fw-bench: %s\n", why.c_str());
    std::exit(1);
}

double ms(clk::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

using rig::bench::median;

std::vector<std::byte> command(ifc::opcode op, std::uint16_t op_mod, std::size_t in_bytes) {
    return fw::command_input<ifc::mbox_in>(op, op_mod, in_bytes);
}

template <class T>
T must(fw::result<T> r) {
    if (!r) {
        die(r.error().message);
    }
    if constexpr (!std::is_void_v<T>) {
        return std::move(*r);
    }
}

// One command, back to back, for `seconds`: commands per second.
double rate(fw::command_queue& q, const std::vector<std::byte>& in, std::size_t out_bytes, double seconds) {
    const auto start = clk::now();
    const auto stop = start + std::chrono::duration_cast<clk::duration>(std::chrono::duration<double>(seconds));
    std::uint64_t n = 0;
    while (clk::now() < stop) {
        for (int i = 0; i < 64; ++i, ++n) {
            if (auto r = q.exec(in, out_bytes, clk::now() + std::chrono::seconds(5)); !r) {
                die(r.error().message);
            }
        }
    }
    return static_cast<double>(n) / std::chrono::duration<double>(clk::now() - start).count();
}

// One HWRM request, back to back, for `seconds`: requests per second.
template <class Out, class In>
double hwrm_rate(rig::firmware::bnxt::hwrm_channel& ch, const In& in, double seconds) {
    const auto start = clk::now();
    const auto stop = start + std::chrono::duration_cast<clk::duration>(std::chrono::duration<double>(seconds));
    std::uint64_t n = 0;
    while (clk::now() < stop) {
        for (int i = 0; i < 64; ++i, ++n) {
            if (auto r = ch.send<Out>(in, clk::now() + std::chrono::seconds(5)); !r) {
                die(r.error().message);
            }
        }
    }
    return static_cast<double>(n) / std::chrono::duration<double>(clk::now() - start).count();
}

// One RoCE-channel command (side buffer of `side` bytes), back to back, for `seconds`: per second.
template <class Resp, class Cmd>
double rcfw_rate(rig::firmware::bnxt::rcfw_channel& ch, const Cmd& cmd, std::size_t side, double seconds) {
    const auto start = clk::now();
    const auto stop = start + std::chrono::duration_cast<clk::duration>(std::chrono::duration<double>(seconds));
    std::uint64_t n = 0;
    while (clk::now() < stop) {
        for (int i = 0; i < 64; ++i, ++n) {
            if (auto r = ch.send<Resp>(cmd, side, clk::now() + std::chrono::seconds(5)); !r) {
                die(r.error().message);
            }
        }
    }
    return static_cast<double>(n) / std::chrono::duration<double>(clk::now() - start).count();
}

// bnxt beside mlx5: the BCM57508 model served the same way.
void bnxt_figures(const std::string& dir, int bring_ups, double seconds) {
    namespace bfw = rig::firmware::bnxt;
    namespace babi = rig::bnxt::abi;
    const std::string sock = dir + "/bnxt.sock";
    rig::sim::bnxt::function_model model;
    auto srv = rig::sim::vfio_user::server::create(sock, model);
    if (!srv) {
        die("serving the bnxt model: " + srv.error());
    }
    model.attach(**srv);
    (*srv)->start();
    auto fn = rig::driver::open("vfio-user:" + sock);
    if (!fn) {
        die(fn.error().message);
    }
    std::printf("bnxt firmware path (HWRM and the RoCE channel), BCM57508 model in this process over vfio-user\n");
    // HWRM is polled in both modes (bnxt_en polls it too); the RoCE channel is polled, or woken
    // by the CREQ's MSI-X vector (device_options::rcfw_events)
    for (const bool events : {false, true}) {
        const char* mode = events ? "event" : "polling";
        bfw::device_options o;  // a 64 K-entry CREQ, as bnxt_re
        o.rcfw_events = events;
        std::vector<double> up_ms, down_ms;
        for (int i = 0; i < bring_ups; ++i) {
            const auto t0 = clk::now();
            auto dev = bfw::device::bring_up(**fn, o);
            const auto t1 = clk::now();
            if (!dev) {
                die(dev.error().message);
            }
            if (auto r = (*dev)->teardown(); !r) {
                die(r.error().message);
            }
            up_ms.push_back(ms(t1 - t0));
            down_ms.push_back(ms(clk::now() - t1));
        }
        std::printf("  %-12s bring-up to READY  median %8.3f ms   teardown median %8.3f ms\n", mode, median(up_ms),
                    median(down_ms));
        auto dev = bfw::device::bring_up(**fn, o);
        if (!dev) {
            die(dev.error().message);
        }
        if (!events) {
            auto& ch = (*dev)->hwrm();
            const double ver = hwrm_rate<babi::hwrm_ver_get_output>(ch, babi::hwrm_ver_get_input{}, seconds);
            const double caps = hwrm_rate<babi::hwrm_func_qcaps_output>(ch, babi::hwrm_func_qcaps_input{}, seconds);
            std::printf("  %-12s VER_GET %8.0f/s (%6.2f us)  FUNC_QCAPS %8.0f/s (%6.2f us)\n", mode, ver, 1e6 / ver,
                        caps, 1e6 / caps);
        }
        // the RoCE channel: QUERY_VERSION (no side buffer), QUERY_FUNC (a 160-byte side buffer)
        auto& roce = *(*dev)->rcfw();
        const double qv = rcfw_rate<babi::creq_query_version_resp>(roce, babi::cmdq_query_version{}, 0, seconds);
        const double qf = rcfw_rate<babi::creq_query_func_resp>(roce, babi::cmdq_query_func{}, 160, seconds);
        std::printf("  %-12s RCFW QUERY_VERSION %8.0f/s (%6.2f us)  QUERY_FUNC %8.0f/s (%6.2f us)  interrupts %llu\n",
                    mode, qv, 1e6 / qv, qf, 1e6 / qf, static_cast<unsigned long long>(roce.interrupts()));
        if (auto r = (*dev)->teardown(); !r) {
            die(r.error().message);
        }
    }
    (*fn)->release();
    (*srv)->stop();
}

}  // namespace

int main(int argc, char** argv) {
    const int bring_ups = argc > 1 ? std::max(1, std::atoi(argv[1])) : 21;
    const double seconds = argc > 2 ? std::max(0.1, std::atof(argv[2])) : 1.0;

    char tmpl[] = "/tmp/rig-fw-bench-XXXXXX";
    if (::mkdtemp(tmpl) == nullptr) {
        die("mkdtemp failed");
    }
    const std::string dir = tmpl;
    const std::string sock = dir + "/mlx5.sock";
    rig::sim::mlx5::function_model model;
    auto srv = rig::sim::vfio_user::server::create(sock, model);
    if (!srv) {
        die("serving the model: " + srv.error());
    }
    model.attach(**srv);
    (*srv)->start();
    auto fn = rig::driver::open("vfio-user:" + sock);
    if (!fn) {
        die(fn.error().message);
    }

    std::printf("mlx5 firmware path, model in this process over vfio-user (%d bring-ups, %.1f s per rate)\n",
                bring_ups, seconds);
    for (const bool events : {false, true}) {
        fw::hca_options o;
        o.use_events = events;
        std::vector<double> up_ms, down_ms;
        for (int i = 0; i < bring_ups; ++i) {
            const auto t0 = clk::now();
            auto nic = fw::hca::bring_up(**fn, o);
            const auto t1 = clk::now();
            if (!nic) {
                die(nic.error().message);
            }
            if (auto r = (*nic)->teardown(); !r) {
                die(r.error().message);
            }
            up_ms.push_back(ms(t1 - t0));
            down_ms.push_back(ms(clk::now() - t1));
        }
        const char* mode = events ? "event mode" : "polling mode";  // rates: polling with the EQ live
        std::printf("  %-12s bring-up to READY  median %8.3f ms   teardown median %8.3f ms\n", mode, median(up_ms),
                    median(down_ms));

        // The rates run on a NIC brought up with its event queue (a CQ needs an EQ, and the
        // QP to query needs CQs); polling mode takes the command queue off events for them.
        fw::hca_options with_eq;
        auto nic = fw::hca::bring_up(**fn, with_eq);
        if (!nic) {
            die(nic.error().message);
        }
        fw::command_queue& q = (*nic)->commands();
        fw::stranded_memory& stranded = (*nic)->stranded_registry();
        fw::doorbell_records records(**fn, stranded);
        const auto by = [] { return clk::now() + std::chrono::seconds(5); };
        const std::uint32_t pd = must(fw::alloc_pd(q, by()));
        fw::cq_params cp;
        cp.uar = (*nic)->uar();
        cp.eqn = (*nic)->event_queue()->eqn();
        auto cq = must(fw::cq::create(q, **fn, stranded, records, cp, by()));
        fw::qp_params qp;
        qp.pd = pd;
        qp.send_cq = qp.receive_cq = cq.cqn();
        qp.uar = (*nic)->uar();
        auto rc = must(fw::qp::create(q, **fn, stranded, records, qp, by()));
        if (!events) {
            q.use_events(false);
        }
        auto query_qp = command(ifc::opcode::query_qp, 0, ifc::query_qp_in::size_bytes);
        rig::abi::set<ifc::query_qp_in::qpn>(query_qp, rc.qpn());
        const double nop = rate(q, command(ifc::opcode::nop, 0, ifc::nop_in::size_bytes), ifc::nop_out::size_bytes,
                                seconds);
        const double qpq = rate(q, query_qp, ifc::query_qp_out::size_bytes, seconds);
        const double cap = rate(q,
                                command(ifc::opcode::query_hca_cap,
                                        ifc::query_hca_cap_op_mod(ifc::cap_type::general_device, ifc::cap_mode::cur),
                                        ifc::query_hca_cap_in::size_bytes),
                                ifc::query_hca_cap_out::size_bytes, seconds);
        std::printf("  %-12s NOP %8.0f/s (%6.2f us)  QUERY_QP %8.0f/s (%6.2f us)  QUERY_HCA_CAP %8.0f/s (%6.2f us)\n",
                    mode, nop, 1e6 / nop, qpq, 1e6 / qpq, cap, 1e6 / cap);
        must(rc.destroy(q, **fn, stranded, by()));
        must(cq.destroy(q, **fn, stranded, by()));
        must(fw::dealloc_pd(q, pd, by()));
        if (auto r = (*nic)->teardown(); !r) {
            die(r.error().message);
        }
    }
    (*fn)->release();
    (*srv)->stop();
    bnxt_figures(dir, bring_ups, seconds);
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
    return 0;
}
