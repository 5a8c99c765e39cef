// A process set's members: global ranks, ascending, without duplicates. That order is the one
// every member agrees on (allgather rows, alltoall blocks, ring neighbours, tree roots), so
// positions and neighbours are computed here instead of by hand at each use.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace tutti {

class MemberList {
 public:
  MemberList() = default;
  // `sorted`: ascending, no duplicates (as tuttid and the set registry keep them).
  explicit MemberList(std::vector<int32_t> sorted) : ranks_(std::move(sorted)) {}

  bool Contains(int32_t rank) const { return std::binary_search(ranks_.begin(), ranks_.end(), rank); }
  // The position of member `rank` (for a non-member: where it would be inserted).
  size_t IndexOf(int32_t rank) const {
    return static_cast<size_t>(std::lower_bound(ranks_.begin(), ranks_.end(), rank) - ranks_.begin());
  }
  // The ring's neighbours of member `rank`, wrapping around.
  int32_t Next(int32_t rank) const { return ranks_[(IndexOf(rank) + 1) % ranks_.size()]; }
  int32_t Previous(int32_t rank) const {
    return ranks_[(IndexOf(rank) + ranks_.size() - 1) % ranks_.size()];
  }

  size_t size() const { return ranks_.size(); }
  bool empty() const { return ranks_.empty(); }
  int32_t operator[](size_t i) const { return ranks_[i]; }
  int32_t front() const { return ranks_.front(); }
  std::vector<int32_t>::const_iterator begin() const { return ranks_.begin(); }
  std::vector<int32_t>::const_iterator end() const { return ranks_.end(); }
  const std::vector<int32_t>& ranks() const { return ranks_; }

 private:
  std::vector<int32_t> ranks_;
};

}  // namespace tutti
