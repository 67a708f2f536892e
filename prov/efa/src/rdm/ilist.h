/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * An intrusive doubly linked FIFO: O(1) push, pop and unlink, no allocation. An item
 * (T derives from IListNode<T>) is on at most one list at a time; on_list() tells.
 */
#ifndef EFA_RDM_ILIST_H
#define EFA_RDM_ILIST_H

#include <cstddef>

namespace efa::rdm {

template <typename T> struct IListNode {
	T *il_prev = nullptr;
	T *il_next = nullptr;
	bool il_linked = false;
	bool on_list() const { return il_linked; }
};

template <typename T> class IList {
public:
	IList() = default;
	IList(const IList &) = delete;
	IList &operator=(const IList &) = delete;

	bool empty() const { return !head_; }
	size_t size() const { return size_; }
	T *front() const { return head_; }
	T *back() const { return tail_; }
	static T *next(const T *t) { return t->il_next; }

	void push_back(T *t)
	{
		t->il_prev = tail_;
		t->il_next = nullptr;
		t->il_linked = true;
		if (tail_)
			tail_->il_next = t;
		else
			head_ = t;
		tail_ = t;
		size_++;
	}

	void push_front(T *t)
	{
		t->il_prev = nullptr;
		t->il_next = head_;
		t->il_linked = true;
		if (head_)
			head_->il_prev = t;
		else
			tail_ = t;
		head_ = t;
		size_++;
	}

	void unlink(T *t)
	{
		if (t->il_prev)
			t->il_prev->il_next = t->il_next;
		else
			head_ = t->il_next;
		if (t->il_next)
			t->il_next->il_prev = t->il_prev;
		else
			tail_ = t->il_prev;
		t->il_prev = t->il_next = nullptr;
		t->il_linked = false;
		size_--;
	}

	T *pop_front()
	{
		T *t = head_;
		if (t)
			unlink(t);
		return t;
	}

	/* The first item for which pred(item) holds, or null. */
	template <typename P> T *find(P &&pred) const
	{
		for (T *t = head_; t; t = t->il_next)
			if (pred(*t))
				return t;
		return nullptr;
	}

private:
	T *head_ = nullptr;
	T *tail_ = nullptr;
	size_t size_ = 0;
};

} // namespace efa::rdm

#endif
