// torch_neuronx._C_dist: the project's only pybind module, exposing the c10d backend.

#include "distributed/NeuronBackend.h"

#include <torch/csrc/utils/pybind.h>

namespace py = pybind11;

namespace {

// Holds the backend for Python; the last reference is dropped without the GIL. Destroying the
// gloo group joins its transport threads, and a failed collective completing there releases
// tensors whose Python objects need the GIL: holding it while joining would deadlock.
template <typename T>
class ReleasedWithoutGil {
 public:
  ReleasedWithoutGil() = default;
  explicit ReleasedWithoutGil(T* raw) : ptr_(c10::intrusive_ptr<T>::reclaim_copy(raw)) {}
  explicit ReleasedWithoutGil(c10::intrusive_ptr<T> ptr) : ptr_(std::move(ptr)) {}
  ReleasedWithoutGil(const ReleasedWithoutGil&) = default;
  ReleasedWithoutGil& operator=(const ReleasedWithoutGil&) = default;
  ~ReleasedWithoutGil() {
    if (ptr_ && PyGILState_Check()) {
      py::gil_scoped_release no_gil;
      ptr_.reset();
    }
  }
  T* get() const { return ptr_.get(); }

 private:
  c10::intrusive_ptr<T> ptr_;
};

} // namespace

PYBIND11_DECLARE_HOLDER_TYPE(T, ReleasedWithoutGil<T>, true)

PYBIND11_MODULE(_C_dist, m) {
  // c10d.Backend must be registered with pybind before a subclass can be.
  py::module_::import("torch.distributed");
  py::class_<neuron::dist::NeuronBackend, c10d::Backend,
      ReleasedWithoutGil<neuron::dist::NeuronBackend>>(
      m, "NeuronBackend", "The c10d backend for neuron tensors, over a gloo transport.")
      .def(py::init([](c10::intrusive_ptr<c10d::Backend> gloo) {
        return ReleasedWithoutGil<neuron::dist::NeuronBackend>(
            c10::make_intrusive<neuron::dist::NeuronBackend>(std::move(gloo)));
      }),
          py::arg("gloo"));
  m.def(
      "wait_for_completions",
      [](double timeout_s) {
        return neuron::dist::wait_for_completions(
            std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000)));
      },
      py::arg("timeout_s"), py::call_guard<py::gil_scoped_release>(),
      "Waits until no collective is completing on a transport thread; False on timeout.");
}
