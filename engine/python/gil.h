#pragma once
// The GIL rules of the bindings, written once: engine work runs without the GIL; objects whose
// destructor joins engine threads are destroyed without it; long waits let Python handle signals.
#include <nanobind/nanobind.h>

#include <functional>
#include <memory>

namespace pao::python {

// Runs `f` without the GIL. A Python error stored by a failed run (a KeyboardInterrupt, a
// failing Python input) is re-raised as a copy: raising moves the error out of the object, and
// the run raises the same stored object again on every later call.
template <class F>
auto without_gil(F&& f) {
  try {
    nanobind::gil_scoped_release nogil;
    return f();
  } catch (const nanobind::python_error& e) {
    throw nanobind::python_error(e);
  }
}

// Shared ownership of an engine object whose destructor joins threads (a run's producers or
// workers). It is destroyed without the GIL: one of those threads may be waiting for the GIL (to
// pull a Python input, to call a map_batches function), and joining it while holding the GIL
// would deadlock.
template <class T>
std::shared_ptr<T> shared_without_gil(T* object) {
  return std::shared_ptr<T>(object, [](T* p) {
    if (Py_IsInitialized() && PyGILState_Check()) {
      nanobind::gil_scoped_release nogil;
      delete p;
    } else {
      delete p;
    }
  });
}

// The interpreter's main thread (threading.main_thread().ident), set when the module loads.
inline unsigned long& main_thread_ident() noexcept {
  static unsigned long ident = 0;
  return ident;
}

// Ctrl-C for a run: the engine calls this about every 50 ms while a result's next() works or
// waits without the GIL; on the main thread it takes the GIL to let Python run signal handlers,
// and a KeyboardInterrupt (or what a handler raises) is thrown, which ends the run. Python runs
// signal handlers on the main thread alone (PyErr_CheckSignals does nothing elsewhere), so any
// other thread waiting on a result never takes the GIL here: a daemon thread that asked for it
// while the interpreter finalizes would be ended inside the engine's frames, aborting the
// process (std::terminate on the forced unwind).
inline std::function<void()> interrupt_check() {
  return [] {
    if (PyThread_get_thread_ident() != main_thread_ident()) return;
    nanobind::gil_scoped_acquire gil;
    if (PyErr_CheckSignals() != 0) throw nanobind::python_error();
  };
}

}  // namespace pao::python
