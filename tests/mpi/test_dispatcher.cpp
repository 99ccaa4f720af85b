// Rank 0's bookkeeping of a distributed tune (distributed/src/dispatcher.hpp): problems handed out on
// request, a failed problem retried on a rank that has not failed it, given up by name after
// max_attempts ranks or when no rank may take it, a rank that fails what others decide retired.
#define BOOST_TEST_MODULE dispatcher
#include <boost/test/unit_test.hpp>

#include "dispatcher.hpp"

using convtune::dist::Dispatcher;

BOOST_AUTO_TEST_CASE(hands_out_each_problem_once) {
    Dispatcher d(3, 2, 2, 3);
    BOOST_TEST(d.take(0).value_or(-1) == 0);
    BOOST_TEST(d.take(1).value_or(-1) == 1);
    BOOST_TEST(d.take(1).value_or(-1) == 2);
    BOOST_TEST(!d.take(0).has_value());
    BOOST_TEST(!d.finished());
    d.done(0, 0);
    d.done(1, 1);
    d.done(1, 2);
    BOOST_TEST(d.finished());
    BOOST_TEST(d.decided() == (std::vector<int64_t>{1, 2}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(failed_problem_goes_to_another_rank) {
    Dispatcher d(2, 2, 2, 3);
    const int64_t i = d.take(1).value_or(-1);
    d.failed(1, i, "boom");
    // rank 1 never gets it again; rank 0 gets it first
    BOOST_TEST(d.take(1).value_or(-1) == 1 - i);
    BOOST_TEST(d.take(0).value_or(-1) == i);
    d.done(0, i);
    d.done(1, 1 - i);
    BOOST_TEST(d.finished());
    BOOST_TEST(d.given_up().empty());
    BOOST_TEST(d.retried() == 1);
}

BOOST_AUTO_TEST_CASE(gives_up_after_max_attempts_with_every_reason) {
    Dispatcher d(1, 3, 2, 3);
    d.failed(0, d.take(0).value_or(-1), "first");
    d.failed(1, d.take(1).value_or(-1), "second");
    BOOST_TEST(d.finished());
    BOOST_TEST(!d.take(2).has_value());
    BOOST_REQUIRE(d.is_given_up(0));
    BOOST_TEST(d.given_up().at(0) == (std::vector<std::string>{"rank 0: first", "rank 1: second"}),
               boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(gives_up_when_no_other_rank_is_left) {
    Dispatcher d(1, 2, 5, 3);
    d.exclude(0);  // rank 0 only coordinates
    d.failed(1, d.take(1).value_or(-1), "broken");
    BOOST_TEST(d.finished());
    BOOST_TEST(d.is_given_up(0));
}

BOOST_AUTO_TEST_CASE(retires_a_rank_that_fails_what_others_decide) {
    Dispatcher d(5, 2, 2, 2);
    for (int k = 0; k < 2; ++k) {
        const int64_t i = d.take(1).value_or(-1);
        d.failed(1, i, "device lost");
        BOOST_TEST(d.take(0).value_or(-1) == i);
        d.done(0, i);
    }
    BOOST_TEST(d.retired(1));
    BOOST_TEST(!d.take(1).has_value());
    BOOST_TEST(d.retired_ranks() == (std::vector<int>{1}), boost::test_tools::per_element());
    while (auto i = d.take(0)) d.done(0, *i);
    BOOST_TEST(d.finished());
    BOOST_TEST(d.given_up().empty());
}

BOOST_AUTO_TEST_CASE(every_rank_retired_gives_up_the_rest) {
    Dispatcher d(3, 1, 1, 1);
    d.exclude(0);
    BOOST_TEST(d.finished());
    BOOST_TEST(d.given_up().size() == 3u);
}

// A rank that stops answering (kill -STOP, a hung device): its problem goes to another rank first,
// not as a failure, and it gets no more work (issue 32, D8).
BOOST_AUTO_TEST_CASE(a_lost_rank_hands_its_problem_on) {
    Dispatcher d(3, 2, 2, 3);
    BOOST_TEST(*d.take(0) == 0);
    BOOST_TEST(*d.take(1) == 1);
    BOOST_TEST(d.holds(1));
    BOOST_TEST((d.lose(1) == std::vector<int64_t>{1}));
    BOOST_TEST(d.lost(1));
    BOOST_TEST(d.retired(1));
    BOOST_TEST(!d.holds(1));
    BOOST_TEST(!d.take(1).has_value());
    BOOST_TEST(*d.take(0) == 1);  // first in line
    d.done(0, 0);
    d.done(0, 1);
    BOOST_TEST(*d.take(0) == 2);
    d.done(0, 2);
    BOOST_TEST(d.finished());
    BOOST_TEST(d.given_up().empty());
    BOOST_TEST(d.retried() == 0);
    BOOST_TEST((d.lost_ranks() == std::vector<int>{1}));
    // Every rank lost: the rest is given up, named.
    Dispatcher e(2, 2, 2, 3);
    e.take(0);
    e.lose(0);
    e.lose(1);
    BOOST_TEST(e.finished());
    BOOST_TEST(e.given_up().size() == 2u);
}
