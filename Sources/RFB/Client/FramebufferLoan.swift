import NIOConcurrencyHelpers

/// One hand-over of the framebuffer between the client's loop (which lends and waits) and a
/// borrowing thread: 0 waiting for the loop, 1 lent, 2 given back, 3 called off (the borrower
/// stopped waiting before the loop got to it; the loop then lends nothing).
final class FramebufferLoan: @unchecked Sendable {
    // `view` is only touched with `state` locked; the pointer in it is valid while the lending
    // loop waits for state 2.
    private let state = ConditionLock(value: 0)
    private var view: (width: Int, height: Int, pixels: UnsafeBufferPointer<UInt32>)?

    /// On the loop: hands the pixels over and waits until they are given back.
    func lend(width: Int, height: Int, _ pixels: UnsafeBufferPointer<UInt32>) {
        // Not waiting: a value other than 0 here is 3, a loan already called off.
        guard state.lock(whenValue: 0, timeoutSeconds: 0) else { return }
        view = (width, height, pixels)
        state.unlock(withValue: 1)
        state.lock(whenValue: 2)
        view = nil
        state.unlock()
    }

    /// On the borrowing thread: the pixels once lent, or nil (the loan called off) after `patience`.
    func borrow(patience: Double) -> (width: Int, height: Int, pixels: UnsafeBufferPointer<UInt32>)? {
        if state.lock(whenValue: 1, timeoutSeconds: patience) {
            defer { state.unlock() }
            return view
        }
        // Still 0: called off. Otherwise the loop lent it just now (only it moves 0 → 1).
        if state.lock(whenValue: 0, timeoutSeconds: 0) {
            state.unlock(withValue: 3)
            return nil
        }
        state.lock(whenValue: 1)
        defer { state.unlock() }
        return view
    }

    /// On the borrowing thread, after `borrow` returned the pixels: the loop may go on.
    func giveBack() {
        state.lock()
        state.unlock(withValue: 2)
    }
}
