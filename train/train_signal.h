/* Graceful interruption of training: SIGINT / SIGTERM ask the run to stop after the
 * current step, so the caller can save the training state and exit 128 + signal (130 / 143).
 *
 * train_signals_install installs handlers that only record the signal (async-signal-safe: one
 * sig_atomic_t store) with SA_RESTART, so an interrupted write or read in the step is resumed and not
 * failed with EINTR, and SA_RESETHAND, so a second Ctrl-C or TERM kills the process at once the
 * ordinary way (for a user who does not want to wait for the step and the save).
 * train_signal_pending returns the recorded signal number, 0 when none arrived.
 * train_signals_restore puts back the previous dispositions.
 */
#ifndef SC_TRAIN_SIGNAL_H
#define SC_TRAIN_SIGNAL_H

void train_signals_install(void);
int train_signal_pending(void);
void train_signals_restore(void);

#endif
