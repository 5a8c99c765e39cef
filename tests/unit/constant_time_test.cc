#include "server/security/constant_time.h"

#include <gtest/gtest.h>

namespace tutti::server {
namespace {

TEST(SameSecret, EqualOnlyWhenEveryByteAndTheLengthMatch) {
  EXPECT_TRUE(SameSecret("", ""));
  EXPECT_TRUE(SameSecret("s3cret", "s3cret"));
  EXPECT_FALSE(SameSecret("s3cret", "s3creT"));
  EXPECT_FALSE(SameSecret("s3cret", "X3cret"));
  EXPECT_FALSE(SameSecret("s3cret", "s3cre"));
  EXPECT_FALSE(SameSecret("s3cre", "s3cret"));
  EXPECT_FALSE(SameSecret("", "a"));
  EXPECT_FALSE(SameSecret(std::string("a\0b", 3), std::string("a\0c", 3)));
  EXPECT_TRUE(SameSecret(std::string("a\0b", 3), std::string("a\0b", 3)));
  EXPECT_FALSE(SameSecret("abc", std::string("abc\0", 4)));  // a NUL tail is still a difference
}

}  // namespace
}  // namespace tutti::server
