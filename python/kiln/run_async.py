"""InferenceSession.run_async's worker threads: ORT calls the callback from a thread of its
intra-op pool; Kiln runs the model and the callback on a thread of one process-wide pool (the run
itself releases the GIL and uses the session's own intra-op threads)."""
import concurrent.futures
import os
import sys
import threading

_pool = None
_lock = threading.Lock()


def _executor():
    global _pool
    with _lock:
        if _pool is None:
            _pool = concurrent.futures.ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2),
                                                          thread_name_prefix="kiln-run-async")
        return _pool


def _work(run, callback, user_data):
    try:
        results, err = run(), ""
    except Exception as e:  # the error goes to the callback, as ORT passes its status message
        results, err = [], str(e)
    try:
        callback(results, user_data, err)
    except Exception:
        # Nobody waits on this thread: report the callback's own error as an uncaught one.
        sys.excepthook(*sys.exc_info())


def submit(run, callback, user_data):
    """Runs `run()` on a pool thread, then callback(results, user_data, err)."""
    _executor().submit(_work, run, callback, user_data)
