import Foundation
@testable import RFB
import Testing

/// The hand-over by which a viewer window borrows the client's framebuffer: the lending thread
/// (the client's event loop) waits until the pixels are given back, and a loan the borrower
/// stopped waiting for is never made (so the loop is never left waiting for nobody).
struct FramebufferLoanTests {
    @Test func theLenderWaitsUntilThePixelsAreGivenBack() throws {
        let loan = FramebufferLoan()
        let pixels: [UInt32] = [1, 2, 3, 4, 5, 6]
        let returned = DispatchSemaphore(value: 0)
        let lenderDone = Flag()
        pixels.withUnsafeBufferPointer { buffer in
            let raw = SendablePointer(buffer)
            Thread.detachNewThread {
                loan.lend(width: 3, height: 2, raw.buffer)
                lenderDone.set()
                returned.signal()
            }
            guard let view = loan.borrow(patience: 5) else {
                Issue.record("nothing lent within 5 s")
                return
            }
            #expect(view.width == 3 && view.height == 2 && Array(view.pixels) == [1, 2, 3, 4, 5, 6])
            Thread.sleep(forTimeInterval: 0.05)
            #expect(!lenderDone.isSet, "the lender went on while its pixels were borrowed")
            loan.giveBack()
            #expect(returned.wait(timeout: .now() + 5) == .success)
        }
    }

    @Test func aLoanCalledOffIsNeverMade() {
        let loan = FramebufferLoan()
        #expect(loan.borrow(patience: 0.05) == nil)
        // The loop gets to it late: it must return at once instead of waiting for a borrower.
        let pixels: [UInt32] = [7]
        let started = Date()
        pixels.withUnsafeBufferPointer { loan.lend(width: 1, height: 1, $0) }
        #expect(Date().timeIntervalSince(started) < 1)
    }

    final class Flag: @unchecked Sendable {
        private let lock = NSLock()
        private var value = false
        func set() { lock.lock(); value = true; lock.unlock() }
        var isSet: Bool { lock.lock(); defer { lock.unlock() }; return value }
    }

    struct SendablePointer: @unchecked Sendable {
        let buffer: UnsafeBufferPointer<UInt32>
        init(_ buffer: UnsafeBufferPointer<UInt32>) { self.buffer = buffer }
    }
}
