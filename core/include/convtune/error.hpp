// convtune's one error mechanism for bad input: an exception that names what was wrong.
//
// "Not applicable" is not an error (Algorithm::supports returns a reason), and a failing or
// out-of-memory candidate is a Status value the selector reacts to. Exceptions are reserved for
// input a caller must fix: an invalid problem, a malformed string, an unknown id, a buffer of
// the wrong size.
#pragma once

#include <stdexcept>
#include <string>

namespace convtune {

class Error : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
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

// Text that cannot be parsed (problem string, benchdnn descriptor, shape file, database).
class ParseError : public Error {
public:
    using Error::Error;
};

}  // namespace convtune
