// Keeping a pool's helper off the CPU of the thread it helps.
//
// On a VM the guest scheduler avoids waking a thread on a vCPU the host has descheduled (an idle
// one: `vcpu_is_preempted`), so a worker woken by a caller after some idle time (a request every
// 50 ms) lands on the caller's own CPU and stays there for the whole run, both runnable, one
// core's worth of work: MiniLM at 1x128 on 2 threads took its 1-thread time, 13.7 ms instead of
// 7.2, on the development VM (bench/first_call.py's model with 50 ms pauses), while 2 ms pauses
// kept the second vCPU awake. A worker that finds itself on the CPU its caller published moves
// itself off it (its affinity: the CPUs it was allowed at start minus that one); it moves back
// only when a later caller sits where it went. ONNX Runtime pins its workers when it picks the
// thread count; Kiln leaves the caller's thread and the user's choice of CPUs alone.
#pragma once

namespace kiln::runtime {

/// The CPU the calling thread runs on now (-1 where unknown).
int current_cpu();

/// The calling thread, when it runs on `caller_cpu`, restricts its affinity to the CPUs it may
/// use minus that one (the kernel migrates it at once). Does nothing when it runs elsewhere, when
/// `caller_cpu` < 0, or when no other CPU is allowed. Returns whether it moved. KILN_MOVE_OFF_CALLER=0
/// turns it off.
bool move_off_cpu(int caller_cpu);

}  // namespace kiln::runtime
