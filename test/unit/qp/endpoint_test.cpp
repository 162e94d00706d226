// rig::endpoint's text form: what to_string writes parses back to the same endpoint, and every
// malformed text is refused with a message naming the fault.
#include <random>

#include <catch2/catch.hpp>

#include "rig/endpoint.hpp"

namespace {

rig::endpoint sample() {
    rig::endpoint e;
    e.qp = 0x000012;
    e.psn = 0xa1b2c3;
    const unsigned char gid[16] = {0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xfe, 0, 0, 1};
    for (std::size_t i = 0; i < 16; ++i) e.gid[i] = std::byte{gid[i]};
    const unsigned char mac[6] = {0x02, 0, 0, 0, 0, 0x01};
    for (std::size_t i = 0; i < 6; ++i) e.mac[i] = std::byte{mac[i]};
    return e;
}

}  // namespace

TEST_CASE("an endpoint's text is one fixed-width line") {
    CHECK(sample().to_string() ==
          "rig-endpoint qp=0x000012 psn=0xa1b2c3 gid=fe80:0000:0000:0000:0000:00ff:fe00:0001 mac=02:00:00:00:00:01");
}

TEST_CASE("to_string then parse gives the same endpoint, for random endpoints") {
    std::mt19937 rng(7);
    for (int i = 0; i < 2000; ++i) {
        rig::endpoint e;
        e.qp = rng() & 0xffffff;
        e.psn = rng() & 0xffffff;
        for (auto& b : e.gid) b = static_cast<std::byte>(rng());
        for (auto& b : e.mac) b = static_cast<std::byte>(rng());
        const auto text = e.to_string();
        const auto back = rig::endpoint::parse(text);
        REQUIRE(back.has_value());
        CHECK(*back == e);
        // a trailing newline (as read from a socket) and upper-case hex are accepted
        std::string upper = text;
        bool in_value = false;  // the keys stay lower case; the hex values do not have to
        for (auto& c : upper) {
            if (c == '=' || c == ' ') {
                in_value = c == '=';
            } else if (in_value && c >= 'a' && c <= 'f') {
                c = static_cast<char>(c - 'a' + 'A');
            }
        }
        const auto again = rig::endpoint::parse(upper + "\n");
        REQUIRE(again.has_value());
        CHECK(*again == e);
    }
}

TEST_CASE("a malformed endpoint text is refused with the reason") {
    const std::string good = sample().to_string();
    auto refused = [](const std::string& text, const std::string& why) {
        const auto r = rig::endpoint::parse(text);
        INFO(text);
        REQUIRE_FALSE(r.has_value());
        CHECK_THAT(r.error(), Catch::Contains(why));
    };
    refused("", "expected \"rig-endpoint");
    refused("perftest 0000:000012:a1b2c3", "expected \"rig-endpoint");
    refused(good + " extra=1", "more than five words");
    refused("rig-endpoint psn=0xa1b2c3 qp=0x000012 gid=fe80:0000:0000:0000:0000:00ff:fe00:0001 mac=02:00:00:00:00:01",
            "in that order");
    refused("rig-endpoint qp=12 psn=0xa1b2c3 gid=fe80:0000:0000:0000:0000:00ff:fe00:0001 mac=02:00:00:00:00:01",
            "qp \"12\" is not 0x-prefixed hex");
    refused("rig-endpoint qp=0x1000000 psn=0xa1b2c3 gid=fe80:0000:0000:0000:0000:00ff:fe00:0001 mac=02:00:00:00:00:01",
            "does not fit 24 bits");
    refused("rig-endpoint qp=0x12 psn=0xa1b2c3 gid=fe80:0000:0000:0000:0000:00ff:fe00:0001 mac=02:00:00:00:00:01",
            "qp \"0x12\" is not 0x and six hex digits");
    refused("rig-endpoint qp=0x000012 psn=0x0001006 gid=fe80:0000:0000:0000:0000:00ff:fe00:0001 mac=02:00:00:00:00:01",
            "psn \"0x0001006\" is not 0x and six hex digits");
    refused("rig-endpoint qp=0x000012 psn=0xzz gid=fe80:0000:0000:0000:0000:00ff:fe00:0001 mac=02:00:00:00:00:01",
            "psn \"0xzz\"");
    refused("rig-endpoint qp=0x000012 psn=0xa1b2c3 gid=fe80::1 mac=02:00:00:00:00:01", "gid must be 8 groups");
    refused("rig-endpoint qp=0x000012 psn=0xa1b2c3 gid=fe80:0000:0000:0000:0000:00ff:fe00:00g1 mac=02:00:00:00:00:01",
            "gid must be 8 groups");
    refused("rig-endpoint qp=0x000012 psn=0xa1b2c3 gid=fe80:0000:0000:0000:0000:00ff:fe00:0001 mac=02:00:00:00:00",
            "mac must be 6 groups");
    refused("rig-endpoint qp=0x000012 psn=0xa1b2c3 gid=fe80:0000:0000:0000:0000:00ff:fe00:0001 mac=02-00-00-00-00-01",
            "mac must be 6 groups");
}
