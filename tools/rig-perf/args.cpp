// rig-perf's command-line syntax through getopt_long (args.hpp).
#include "tools/rig-perf/args.hpp"

#include <array>
#include <mutex>

#include <getopt.h>

namespace rig::perf {

namespace {

constexpr bool arg = true, no_arg = false;

// perftest_parameters.c long_options[], in its order (the entries under #ifdef HAVE_... too:
// some perftest build takes each), then rig-perf's own. perftest's --ethertype (val 'Y') and
// --use_rss ('G') have no short form: its getopt string lacks Y and G.
constexpr flag table[] = {
    {"port", arg, 'p', opt::port, {}},
    {"ib-dev", arg, 'd', opt::ib_dev, {}},
    {"ib-port", arg, 'i', opt::none, "device port: a Rig function has one port"},
    {"mtu", arg, 'm', opt::mtu, {}},
    {"size", arg, 's', opt::size, {}},
    {"iters", arg, 'n', opt::iters, {}},
    {"tx-depth", arg, 't', opt::tx_depth, {}},
    {"qp-timeout", arg, 'u', opt::none, "ACK timeout: Rig's connect uses 14 (67 ms)"},
    {"sl", arg, 'S', opt::none, "service level"},
    {"gid-index", arg, 'x', opt::none, "GID index: Rig uses GID 0"},
    {"all", no_arg, 'a', opt::all, {}},
    {"CPU-freq", no_arg, 'F', opt::cpu_freq, {}},
    {"connection", arg, 'c', opt::none, "transport type: Rig runs RC only"},
    {"qp", arg, 'q', opt::qp, {}},
    {"events", no_arg, 'e', opt::none, "sleep on completion events"},
    {"vector", arg, 'X', opt::none, "completion vector for events"},
    {"inline_size", arg, 'I', opt::inline_size, {}},
    {"outs", arg, 'o', opt::none, "outstanding reads"},
    {"mcg", no_arg, 'g', opt::none, "multicast"},
    {"comm_rdma_cm", no_arg, 'z', opt::none, "rdma_cm for the data exchange"},
    {"rdma_cm", no_arg, 'R', opt::none, "connect with rdma_cm"},
    {"tos", arg, 'T', opt::none, "type of service"},
    {"hop_limit", arg, 'L', opt::none, "IPv6 hop limit"},
    {"help", no_arg, 'h', opt::help, {}},
    {"MGID", arg, 'M', opt::none, "multicast GID"},
    {"rx-depth", arg, 'r', opt::none, "receive queue depth: rig-perf keeps the receive ring full"},
    {"bidirectional", no_arg, 'b', opt::none, "bidirectional bandwidth"},
    {"cq-mod", arg, 'Q', opt::cq_mod, {}},
    {"noPeak", no_arg, 'N', opt::none, "skip the peak bandwidth"},
    {"version", no_arg, 'V', opt::none, "print the version"},
    {"report-cycles", no_arg, 'C', opt::none, "latency in CPU cycles"},
    {"report-histogrm", no_arg, 'H', opt::none, "latency histogram"},
    {"report-unsorted", no_arg, 'U', opt::none, "unsorted latency samples"},
    {"atomic_type", arg, 'A', opt::none, "atomic operation type"},
    {"dualport", no_arg, 'O', opt::none, "dual-port mode"},
    {"post_list", arg, 'l', opt::none, "chain n requests per post"},
    {"duration", arg, 'D', opt::duration, {}},
    {"margin", arg, 'f', opt::none, "duration margin"},
    {"source_mac", arg, 'B', opt::none, "raw Ethernet source MAC"},
    {"dest_mac", arg, 'E', opt::none, "raw Ethernet destination MAC"},
    {"dest_ip", arg, 'J', opt::none, "raw Ethernet destination IP"},
    {"source_ip", arg, 'j', opt::none, "raw Ethernet source IP"},
    {"dest_port", arg, 'K', opt::none, "raw Ethernet destination port"},
    {"source_port", arg, 'k', opt::none, "raw Ethernet source port"},
    {"ethertype", arg, 0, opt::none, "raw Ethernet ethertype"},
    {"limit_bw", arg, 'w', opt::none, "fail below a bandwidth"},
    {"limit_msgrate", arg, 'y', opt::none, "fail below a message rate"},
    {"server", no_arg, 'Z', opt::none, "raw Ethernet server role"},
    {"client", no_arg, 'P', opt::none, "raw Ethernet client role"},
    {"mac_fwd", no_arg, 'v', opt::none, "MAC forwarding"},
    {"use_rss", no_arg, 0, opt::none, "receive side scaling"},
    {"report-counters", arg, 'W', opt::none, "report device counters"},
    {"force-link", arg, 0, opt::none, "force the link layer"},
    {"remote_mac", arg, 0, opt::none, "raw Ethernet remote MAC"},
    {"local_mac", arg, 0, opt::none, "raw Ethernet local MAC"},
    {"remote_ip", arg, 0, opt::none, "raw Ethernet remote IP"},
    {"local_ip", arg, 0, opt::none, "raw Ethernet local IP"},
    {"remote_port", arg, 0, opt::none, "raw Ethernet remote port"},
    {"local_port", arg, 0, opt::none, "raw Ethernet local port"},
    {"run_infinitely", no_arg, 0, opt::none, "run without end, printing every -D seconds"},
    {"report_gbits", no_arg, 0, opt::report_gbits, {}},
    {"use-srq", no_arg, 0, opt::none, "shared receive queue"},
    {"no_lock", no_arg, 0, opt::none, "lock-free thread domain"},
    {"use-null-mr", no_arg, 0, opt::none, "null memory region"},
    {"report-both", no_arg, 0, opt::none, "report both sides"},
    {"reversed", no_arg, 0, opt::none, "server sends, client receives"},
    {"pkey_index", arg, 0, opt::none, "partition key index"},
    {"tcp", no_arg, 0, opt::none, "raw Ethernet TCP"},
    {"burst_size", arg, 0, opt::none, "rate-limited bursts"},
    {"typical_pkt_size", arg, 0, opt::none, "rate limiter packet size"},
    {"rate_limit", arg, 0, opt::none, "rate limit"},
    {"rate_limit_type", arg, 0, opt::none, "rate limiter type"},
    {"rate_units", arg, 0, opt::none, "rate limiter units"},
    {"output", arg, 0, opt::none, "print one number only"},
    {"cpu_util", no_arg, 0, opt::none, "report CPU utilization"},
    {"out_json", no_arg, 0, opt::out_json, {}},
    {"out_json_file", arg, 0, opt::out_json_file, {}},
    {"latency_gap", arg, 0, opt::none, "gap between latency iterations"},
    {"flow_label", arg, 0, opt::none, "IPv6 flow label"},
    {"retry_count", arg, 0, opt::none, "transport retry count: Rig's connect uses 7"},
    {"dont_xchg_versions", no_arg, 0, opt::none, "skip the version exchange"},
    {"payload_file_path", arg, 0, opt::none, "payload from a file"},
    {"use_cuda", arg, 0, opt::none, "GPU memory"},
    {"use_cuda_bus_id", arg, 0, opt::none, "GPU memory"},
    {"use_cuda_dmabuf", no_arg, 0, opt::none, "GPU memory"},
    {"use_cuda_pcie_mapping", no_arg, 0, opt::none, "GPU memory"},
    {"use_data_direct", no_arg, 0, opt::none, "data-direct DMA"},
    {"cuda_mem_type", arg, 0, opt::none, "GPU memory"},
    {"use_musa", arg, 0, opt::none, "GPU memory"},
    {"use_musa_bus_id", arg, 0, opt::none, "GPU memory"},
    {"use_musa_dmabuf", no_arg, 0, opt::none, "GPU memory"},
    {"use_musa_pcie_mapping", no_arg, 0, opt::none, "GPU memory"},
    {"use_rocm", arg, 0, opt::none, "GPU memory"},
    {"use_rocm_dmabuf", no_arg, 0, opt::none, "GPU memory"},
    {"use_neuron", arg, 0, opt::none, "accelerator memory"},
    {"use_neuron_dmabuf", no_arg, 0, opt::none, "accelerator memory"},
    {"use_hl", arg, 0, opt::none, "accelerator memory"},
    {"use_mlu", arg, 0, opt::none, "accelerator memory"},
    {"use_mlu_dmabuf", no_arg, 0, opt::none, "accelerator memory"},
    {"use_opencl", arg, 0, opt::none, "accelerator memory"},
    {"opencl_platform_id", arg, 0, opt::none, "accelerator memory"},
    {"use_ib_dm_dmabuf", arg, 0, opt::none, "device memory"},
    {"gpu_touch", arg, 0, opt::none, "GPU memory"},
    {"mmap", arg, 0, opt::none, "memory from a file"},
    {"mmap-offset", arg, 0, opt::none, "memory from a file"},
    {"ipv6", no_arg, 0, opt::none, "IPv6 raw Ethernet"},
    {"ipv6-addr", no_arg, 0, opt::none, "IPv6 raw Ethernet"},
    {"raw_ipv6", no_arg, 0, opt::none, "IPv6 raw Ethernet"},
    {"report-per-port", no_arg, 0, opt::none, "per-port bandwidth"},
    {"odp", no_arg, 0, opt::none, "on-demand paging"},
    {"use_hugepages", no_arg, 0, opt::none, "hugepage buffers: Rig takes hugepages when the host has them"},
    {"use_old_post_send", no_arg, 0, opt::none, "ibv_post_send instead of ibv_wr_*"},
    {"promiscuous", no_arg, 0, opt::none, "raw Ethernet promiscuous mode"},
    {"sniffer", no_arg, 0, opt::none, "raw Ethernet sniffer"},
    {"raw_mcast", no_arg, 0, opt::none, "raw Ethernet multicast"},
    {"mr_per_qp", no_arg, 0, opt::none, "a memory region per queue pair"},
    {"dlid", arg, 0, opt::none, "destination LID"},
    {"tclass", arg, 0, opt::none, "traffic class"},
    {"wait_destroy", arg, 0, opt::none, "wait before destroying"},
    {"flows", arg, 0, opt::none, "raw Ethernet flows"},
    {"flows_burst", arg, 0, opt::none, "raw Ethernet flows"},
    {"reply_every", arg, 0, opt::none, "latency reply frequency"},
    {"perform_warm_up", no_arg, 0, opt::perform_warm_up, {}},
    {"vlan_en", no_arg, 0, opt::none, "raw Ethernet VLAN"},
    {"vlan_pcp", arg, 0, opt::none, "raw Ethernet VLAN priority"},
    {"recv_post_list", arg, 0, opt::none, "chain n receives per post"},
    {"aes_xts", no_arg, 0, opt::none, "AES-XTS encryption"},
    {"encrypt_on_tx", no_arg, 0, opt::none, "AES-XTS encryption"},
    {"sig_before", no_arg, 0, opt::none, "AES-XTS encryption"},
    {"aes_block_size", arg, 0, opt::none, "AES-XTS encryption"},
    {"kek_path", arg, 0, opt::none, "AES-XTS encryption"},
    {"credentials_path", arg, 0, opt::none, "AES-XTS encryption"},
    {"data_enc_keys_number", arg, 0, opt::none, "AES-XTS encryption"},
    {"data_enc_key_app_path", arg, 0, opt::none, "AES-XTS encryption"},
    {"log_dci_streams", arg, 0, opt::none, "DC transport"},
    {"log_active_dci_streams", arg, 0, opt::none, "DC transport"},
    {"disable_pcie_relaxed", no_arg, 0, opt::none, "no PCIe relaxed ordering"},
    {"use_ooo", no_arg, 0, opt::none, "out-of-order data placement"},
    {"congest_type", arg, 0, opt::none, "congestion control type"},
    {"bind_source_ip", arg, 0, opt::none, "source IP for rdma_cm"},
    {"write_with_imm", no_arg, 0, opt::none, "RDMA WRITE with immediate"},
    {"send_with_imm", no_arg, 0, opt::none, "SEND with immediate"},
    {"no_enhanced_reorder", no_arg, 0, opt::none, "no enhanced reordering"},
    {"unsolicited_write", no_arg, 0, opt::none, "SRD unsolicited WRITE"},
    {"connectionless", no_arg, 0, opt::none, "connectionless transport"},
    {"cqe_poll", arg, 0, opt::none, "completions per poll"},
    {"tph_mem", arg, 0, opt::none, "PCIe TLP processing hints"},
    {"cpu_id", arg, 0, opt::none, "PCIe TLP processing hints"},
    {"ph", arg, 0, opt::none, "PCIe TLP processing hints"},
    {"disable_dynamic_polling", no_arg, 0, opt::none, "no dynamic polling"},
    {"sig_offload", no_arg, 0, opt::none, "signature offload"},
    {"data_validation", no_arg, 0, opt::none, "check the data moved"},
    {"data_validation_debug", no_arg, 0, opt::none, "check the data moved"},
    {"pin_cores", arg, 0, opt::none, "pin threads to cores"},
    {"numa_node", arg, 0, opt::none, "NUMA node of the buffers"},
    {"disable_numa", no_arg, 0, opt::none, "no NUMA placement"},
    // rig-perf's own
    {"sim", no_arg, 0, opt::sim, {}},
    {"family", arg, 0, opt::family, {}},
    {"plot", arg, 0, opt::plot, {}},
    {"bind", arg, 0, opt::bind, {}},
    {"max-size", arg, 0, opt::max_size, {}},
};
constexpr std::size_t table_size = std::size(table);

// perftest's getopt string, after "-" (every positional returned in place, whatever
// POSIXLY_CORRECT says: the test name comes first) and ":" (a missing argument returns ':',
// and getopt prints nothing).
constexpr const char* optstring = "-:w:y:p:d:i:m:s:n:t:u:S:x:c:q:I:o:M:r:Q:A:l:D:f:B:T:L:E:J:j:K:k:X:W:aFegzRvhbNVCHUOZP";

// getopt_long's table: each long option returns 256 + its index (its short form returns the
// letter), so that an error's optopt names the option whichever way it was given.
constexpr int long_base = 256;
const std::array<option, table_size + 1>& long_options() {
    static const std::array<option, table_size + 1> o = [] {
        std::array<option, table_size + 1> a{};
        for (std::size_t i = 0; i < table_size; ++i) {
            a[i] = {table[i].name.data(), table[i].has_arg ? required_argument : no_argument, nullptr,
                    long_base + static_cast<int>(i)};
        }
        a[table_size] = {nullptr, 0, nullptr, 0};
        return a;
    }();
    return o;
}

const flag* by_letter(int c) {
    for (const flag& f : table) {
        if (f.letter != 0 && f.letter == c) {
            return &f;
        }
    }
    return nullptr;
}

// "--rep" -> "--rep: ambiguous (--report-cycles, ...)" when more than one long name starts
// so (getopt_long's reading), else "unknown option: --rep (see --help)".
std::string unknown_long(std::string given) {
    if (const auto eq = given.find('='); eq != std::string::npos) {
        given.resize(eq);
    }
    const std::string_view prefix = std::string_view(given).substr(2);
    std::string matches;
    int n = 0;
    for (const flag& f : table) {
        if (f.name.starts_with(prefix)) {
            matches += (n++ == 0 ? "--" : ", --") + std::string(f.name);
        }
    }
    if (n > 1) {
        return given + ": ambiguous (" + matches + ")";
    }
    return "unknown option: " + given + " (see --help)";
}

std::mutex getopt_state;  // optind, optarg, optopt and glibc's own are process-wide

}  // namespace

std::span<const flag> flags() noexcept { return table; }

std::string token::spelled() const {
    if (f == nullptr) {
        return {};
    }
    return as_short ? std::string("-") + f->letter : "--" + std::string(f->name);
}

std::vector<token> scan(const std::vector<std::string>& args) {
    // getopt_long takes argv as char* const[]: copies, behind the program name it skips
    std::vector<std::string> store;
    store.reserve(args.size() + 1);
    store.emplace_back("rig-perf");
    store.insert(store.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (std::string& s : store) {
        argv.push_back(s.data());
    }
    argv.push_back(nullptr);
    const int argc = static_cast<int>(store.size());

    const std::lock_guard lock(getopt_state);
    ::optind = 0;  // glibc: 0 starts over (1 would keep a half-read cluster of the last scan)
    ::opterr = 0;
    std::vector<token> out;
    for (;;) {
        // the element this call reads: with "-" ordering getopt skips none, and optind moves
        // past an element (or a cluster of short flags) only once it is read
        const int at = ::optind == 0 ? 1 : ::optind;
        int index = -1;
        const int c = ::getopt_long(argc, argv.data(), optstring, long_options().data(), &index);
        if (c == -1) {
            for (int i = ::optind; i < argc; ++i) {  // what follows "--"
                out.push_back({nullptr, false, store[static_cast<std::size_t>(i)], {}});
            }
            return out;
        }
        if (c == 1) {
            out.push_back({nullptr, false, std::string(::optarg), {}});
            continue;
        }
        token t;
        if (c == '?' || c == ':') {
            const std::string element = at < argc ? store[static_cast<std::size_t>(at)] : std::string();
            const int o = ::optopt;
            if (o >= long_base) {
                t.f = &table[static_cast<std::size_t>(o - long_base)];
            } else if (o != 0) {
                t.f = by_letter(o);
                t.as_short = true;
            }
            const std::string letter = std::string("-") + static_cast<char>(o);
            const bool long_form = o == 0 || o >= long_base || element.starts_with("--");
            t.value = long_form ? element : letter;  // what was given, to hand on as it was
            if (c == ':') {
                t.error = (t.f != nullptr ? t.spelled() : letter) + " needs a value";
            } else if (o >= long_base) {  // a long option without an argument given one
                t.error = t.spelled() + " takes no value (got '" + element.substr(element.find('=') + 1) + "')";
            } else if (o == 0) {
                t.error = unknown_long(element);
            } else {
                t.error = "unknown option: " + letter + (element == letter ? "" : " in " + element) + " (see --help)";
            }
            out.push_back(std::move(t));
            continue;  // getopt_long reads on after an error
        }
        if (c >= long_base) {
            t.f = &table[static_cast<std::size_t>(c - long_base)];
        } else {
            t.f = by_letter(c);
            t.as_short = true;
        }
        if (::optarg != nullptr && t.f != nullptr && t.f->has_arg) {
            t.value = ::optarg;
        }
        out.push_back(std::move(t));
    }
}

}  // namespace rig::perf
