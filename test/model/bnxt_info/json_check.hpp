#pragma once
// Whether a line is one JSON object (RFC 8259) of the shape rig-info --commands prints: string,
// number, true/false/null, nested objects and arrays allowed. A checker, not a parser: enough
// to hold the tool to "valid JSON" without a JSON library in the tree.
#include <cctype>
#include <string_view>

namespace rig::test::bnxt_info {

class json_check {
public:
    static bool object_line(std::string_view s) {
        json_check j{s};
        j.space();
        if (!j.peek('{') || !j.value()) {
            return false;
        }
        j.space();
        return j._at == s.size();
    }

private:
    explicit json_check(std::string_view s) : _s(s) {}
    bool peek(char c) const { return _at < _s.size() && _s[_at] == c; }
    bool eat(char c) {
        space();
        if (!peek(c)) {
            return false;
        }
        ++_at;
        return true;
    }
    void space() {
        while (_at < _s.size() && (_s[_at] == ' ' || _s[_at] == '\t' || _s[_at] == '\n' || _s[_at] == '\r')) {
            ++_at;
        }
    }
    bool string() {
        if (!eat('"')) {
            return false;
        }
        while (_at < _s.size() && _s[_at] != '"') {
            if (static_cast<unsigned char>(_s[_at]) < 0x20) {
                return false;
            }
            _at += _s[_at] == '\\' ? 2 : 1;
        }
        return eat('"');
    }
    bool number() {
        const std::size_t from = _at;
        if (peek('-')) {
            ++_at;
        }
        while (_at < _s.size() && (std::isdigit(static_cast<unsigned char>(_s[_at])) || _s[_at] == '.' ||
                                   _s[_at] == 'e' || _s[_at] == 'E' || _s[_at] == '+' || _s[_at] == '-')) {
            ++_at;
        }
        return _at > from;
    }
    bool word(std::string_view w) {
        if (_s.substr(_at, w.size()) != w) {
            return false;
        }
        _at += w.size();
        return true;
    }
    template <class Item>
    bool sequence(char open, char close, Item item) {
        if (!eat(open)) {
            return false;
        }
        if (eat(close)) {
            return true;
        }
        do {
            if (!item()) {
                return false;
            }
        } while (eat(','));
        return eat(close);
    }
    bool value() {
        space();
        if (peek('{')) {
            return sequence('{', '}', [&] { return string() && eat(':') && value(); });
        }
        if (peek('[')) {
            return sequence('[', ']', [&] { return value(); });
        }
        if (peek('"')) {
            return string();
        }
        return word("true") || word("false") || word("null") || number();
    }

    std::string_view _s;
    std::size_t _at = 0;
};

}  // namespace rig::test::bnxt_info
