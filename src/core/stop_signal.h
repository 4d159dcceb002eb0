// Graceful stop on SIGTERM, SIGINT or SIGUSR1 (Slurm's time limit, pre-emption, Ctrl-C): the first signal only
// records that a stop was asked for; the train loop polls it once per step (every compute rank agrees on the step,
// cli/train), writes a synchronous checkpoint and ends with kExitStoppedForRequeue, which the slurm/ scripts turn
// into a requeue. A second signal ends the process at once, by that signal's default action, after removing the
// partial file of a checkpoint being written (partial_file_begin), so that no .tmp outlives the process.
// Invariant: the handler only loads and stores lock-free atomics and calls async-signal-safe functions (write,
// unlink, signal, raise); nothing else of the program runs inside it.
#pragma once

namespace mt::stop_signal {

// The exit status of a run that stopped early on a signal after writing its checkpoint (EX_TEMPFAIL: try again).
inline constexpr int kExitStoppedForRequeue = 75;

// Installs the handler for SIGTERM, SIGINT and SIGUSR1 (`train`, before its threads start; other commands keep
// the default action: Ctrl-C ends them at once).
void install();
// The number of the first signal received, or 0.
int requested();
// The run honoured a stop: the process exits with kExitStoppedForRequeue (exit_status()).
void mark_stopped();
// 0, or kExitStoppedForRequeue after mark_stopped().
int exit_status();

// While a file is being written under a temporary name (a checkpoint's .tmp): a second signal removes it before
// ending the process. One at a time; `path` is copied (paths beyond 4095 bytes are not registered).
void partial_file_begin(const char* path);
void partial_file_end();

}  // namespace mt::stop_signal
