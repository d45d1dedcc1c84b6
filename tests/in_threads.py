"""Run one function from several threads at once, for the tests that check per-thread state."""
import threading


def in_threads(work, n):
    """``[work(0), ..., work(n - 1)]``, each called in its own thread, all released together
    by a barrier; an exception in any thread is raised here, after every thread ended."""
    start = threading.Barrier(n)
    results, errors = [None] * n, []

    def run(i):
        try:
            start.wait()
            results[i] = work(i)
        except Exception as e:  # raised from the calling thread below
            errors.append(e)
    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return results
