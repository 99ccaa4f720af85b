// convtune's one error mechanism for bad input: an exception that names what was wrong.
//
// "Not applicable" is not an error (Algorithm::supports returns a reason), and a failing or
// out-of-memory candidate is a Status value the selector reacts to. Exceptions are reserved for
// input a caller must fix: an invalid problem, a malformed string, an unknown id, a buffer of
// the wrong size.
#pragma once

#include <functional>
#include <stdexcept>
#include <string>
#include <string_view>

namespace convtune {

// Input text as a message echoes it, in single quotes: at most `max_chars` bytes of it (then
// "...", so a 10 MB line costs a line of stderr), control bytes and DEL escaped (\0, \t, \n, \r,
// else \xNN) so that a NUL cannot cut the message short and nothing reaches a terminal raw.
// Every message that quotes what the user gave (a problem string, a shape or trace line, a list
// entry, a flag) goes through it.
inline std::string quote_input(std::string_view text, std::size_t max_chars = 80) {
    static constexpr char hex[] = "0123456789abcdef";
    std::string out = "'";
    const std::size_t n = text.size() > max_chars ? max_chars : text.size();
    for (std::size_t i = 0; i < n; ++i) {
        const auto c = static_cast<unsigned char>(text[i]);
        if (c == 0) out += "\\0";
        else if (c == '\t') out += "\\t";
        else if (c == '\n') out += "\\n";
        else if (c == '\r') out += "\\r";
        else if (c < 0x20 || c == 0x7f) (out += "\\x") += std::string{hex[c >> 4], hex[c & 15]};
        else out += static_cast<char>(c);
    }
    if (n < text.size()) out += "...";
    return out + "'";
}

class Error : public std::runtime_error {
public:
    // A NUL byte inside the message would end what() there: it is shown as \0.
    explicit Error(const std::string& what) : std::runtime_error(without_nul(what)) {}
    explicit Error(const char* what) : std::runtime_error(what) {}

private:
    static std::string without_nul(const std::string& s) {
        if (s.find('\0') == std::string::npos) return s;
        std::string out;
        for (char c : s) c ? out += c : out += "\\0";
        return out;
    }
};

// A problem field breaks a rule. what() = "<field>: <rule>".
class InvalidProblem : public Error {
public:
    InvalidProblem(std::string field, std::string rule)
        : Error(field + ": " + rule), field_(std::move(field)), rule_(std::move(rule)) {}
    const std::string& field() const noexcept { return field_; }
    const std::string& rule() const noexcept { return rule_; }

private:
    std::string field_, rule_;
};

// A field of a request (an application operation's input: convtune::app, the simulator's
// options) breaks a rule. what() = "<field>: <rule>". The rule may name other fields as
// "{name}"; message() renders them, and the field itself, through a naming function, so the CLI
// prints its option names (--shapes-dir) where Python shows the field names (shapes_dir).
class InvalidRequest : public Error {
public:
    InvalidRequest(std::string field, std::string rule)
        : Error(render(field, rule, [](std::string_view f) { return std::string(f); })),
          field_(std::move(field)),
          rule_(std::move(rule)) {}
    const std::string& field() const noexcept { return field_; }
    const std::string& rule() const noexcept { return rule_; }
    std::string message(const std::function<std::string(std::string_view)>& name) const {
        return render(field_, rule_, name);
    }

private:
    static std::string render(const std::string& field, const std::string& rule,
                              const std::function<std::string(std::string_view)>& name) {
        std::string out = name(field) + ": ";
        for (std::size_t i = 0; i < rule.size(); ++i) {
            const std::size_t close = rule[i] == '{' ? rule.find('}', i) : std::string::npos;
            if (close == std::string::npos) {
                out += rule[i];
                continue;
            }
            out += name(std::string_view(rule).substr(i + 1, close - i - 1));
            i = close;
        }
        return out;
    }
    std::string field_, rule_;
};

// Text that cannot be parsed (problem string, benchdnn descriptor, shape file, database).
class ParseError : public Error {
public:
    using Error::Error;
};

}  // namespace convtune
