// The live handles of one kind, so that destroying a handle twice (or a
// pointer that never was one) is reported with TINYAI_ERR_MISUSE instead of
// freeing freed memory. T has a `T* next_live` member.
#ifndef TINYAI_COMMON_LIVE_LIST_H_
#define TINYAI_COMMON_LIVE_LIST_H_

#include "common/sync.h"

namespace tinyai {

template <class T>
class LiveList {
 public:
  void Add(T* handle) {
    LockGuard lock(mutex_);
    handle->next_live = head_;
    head_ = handle;
  }
  // False when handle is not in the list.
  bool Remove(const T* handle) {
    LockGuard lock(mutex_);
    for (T** link = &head_; *link; link = &(*link)->next_live) {
      if (*link == handle) {
        *link = handle->next_live;
        return true;
      }
    }
    return false;
  }
  bool Contains(const T* handle) const {
    LockGuard lock(mutex_);
    for (const T* h = head_; h; h = h->next_live) {
      if (h == handle) return true;
    }
    return false;
  }

 private:
  mutable Mutex mutex_;
  T* head_ = nullptr;
};

}  // namespace tinyai

#endif  // TINYAI_COMMON_LIVE_LIST_H_
