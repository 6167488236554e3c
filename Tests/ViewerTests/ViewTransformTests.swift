import Foundation
import Testing
@testable import Viewer

struct ViewTransformTests {
    let picture = ViewerRect(x: 0, y: 0, width: 1600, height: 900)

    @Test func fitLetterboxesAndKeepsTheAspect() {
        // A 4:3 window on a 16:9 picture: full width, bars above and below.
        let t = ViewTransform.make(source: picture, windowWidth: 800, windowHeight: 600, mode: .fit)
        #expect(t.destination == ViewerRect(x: 0, y: 75, width: 800, height: 450))
        #expect(!t.isUnscaled)
        // A tall window gets bars at the sides instead.
        let wide = ViewTransform.make(source: picture, windowWidth: 2000, windowHeight: 900, mode: .fit)
        #expect(wide.destination == ViewerRect(x: 200, y: 0, width: 1600, height: 900))
        #expect(wide.isUnscaled)
    }

    @Test func pointsMapBackToRemotePixelsAndClampAtTheBars() {
        let t = ViewTransform.make(source: picture, windowWidth: 800, windowHeight: 600, mode: .fit)
        #expect(t.remotePoint(windowX: 0, windowY: 75) == (0, 0))
        #expect(t.remotePoint(windowX: 400.5, windowY: 300) == (801, 450))
        #expect(t.remotePoint(windowX: 799.9, windowY: 524.9) == (1599, 899))
        // Over the letterbox bars: the nearest edge pixel.
        #expect(t.remotePoint(windowX: 10, windowY: 5) == (20, 0))
        #expect(t.remotePoint(windowX: -50, windowY: 599) == (0, 899))
    }

    @Test func oneToOneCentresASmallPictureAndPansALargeOne() {
        let small = ViewTransform.make(source: ViewerRect(x: 0, y: 0, width: 400, height: 300), windowWidth: 500, windowHeight: 400, mode: .oneToOne)
        #expect(small.destination == ViewerRect(x: 50, y: 50, width: 400, height: 300))
        #expect(small.remotePoint(windowX: 50, windowY: 50) == (0, 0))

        let panned = ViewTransform.make(source: picture, windowWidth: 800, windowHeight: 600, mode: .oneToOne, pan: (300, 100))
        #expect(panned.destination == ViewerRect(x: -300, y: -100, width: 1600, height: 900))
        #expect(panned.isUnscaled)
        #expect(panned.remotePoint(windowX: 0, windowY: 0) == (300, 100))
        // A pan past the edge stops at it.
        let clamped = ViewTransform.make(source: picture, windowWidth: 800, windowHeight: 600, mode: .oneToOne, pan: (5000, -20))
        #expect(clamped.destination.x == -800 && clamped.destination.y == 0)
    }

    @Test func fillStretchesAndAMonitorSourceOffsetsPoints() {
        let monitor = ViewerRect(x: 1920, y: 0, width: 1280, height: 1024)
        let t = ViewTransform.make(source: monitor, windowWidth: 640, windowHeight: 256, mode: .fill)
        #expect(t.destination == ViewerRect(x: 0, y: 0, width: 640, height: 256))
        #expect(t.remotePoint(windowX: 320, windowY: 128) == (1920 + 640, 512))
        #expect(t.windowRect(for: ViewerRect(x: 1920, y: 0, width: 2, height: 4)) == ViewerRect(x: 0, y: 0, width: 1, height: 1))
        #expect(t.windowRect(for: ViewerRect(x: 0, y: 0, width: 100, height: 100)).isEmpty, "a rectangle on another monitor is not shown")
    }

    /// What a partial present copies: the visible part of a changed rectangle, at its place in
    /// the window (centred, panned, one monitor of several); nothing when scaled.
    @Test func partialCopiesClipToWhatIsShown() {
        let small = ViewTransform.make(source: ViewerRect(x: 0, y: 0, width: 400, height: 300), windowWidth: 500, windowHeight: 400, mode: .oneToOne)
        let copy = small.partialCopy(of: ViewerRect(x: 390, y: -5, width: 20, height: 10), windowWidth: 500, windowHeight: 400)
        #expect(copy?.source == ViewerRect(x: 390, y: 0, width: 10, height: 5))
        #expect(copy?.window == ViewerRect(x: 440, y: 50, width: 10, height: 5))

        let panned = ViewTransform.make(source: picture, windowWidth: 800, windowHeight: 600, mode: .oneToOne, pan: (300, 100))
        let visible = panned.partialCopy(of: ViewerRect(x: 250, y: 650, width: 100, height: 100), windowWidth: 800, windowHeight: 600)
        #expect(visible?.source == ViewerRect(x: 300, y: 650, width: 50, height: 50))
        #expect(visible?.window == ViewerRect(x: 0, y: 550, width: 50, height: 50))
        #expect(panned.partialCopy(of: ViewerRect(x: 0, y: 0, width: 100, height: 100), windowWidth: 800, windowHeight: 600) == nil,
                "scrolled out of the window")

        let monitor = ViewTransform.make(source: ViewerRect(x: 1920, y: 0, width: 1280, height: 1024), windowWidth: 1280, windowHeight: 1024, mode: .oneToOne)
        #expect(monitor.partialCopy(of: ViewerRect(x: 1900, y: 10, width: 40, height: 2), windowWidth: 1280, windowHeight: 1024)?.window
                == ViewerRect(x: 0, y: 10, width: 20, height: 2))
        #expect(monitor.partialCopy(of: ViewerRect(x: 0, y: 0, width: 100, height: 100), windowWidth: 1280, windowHeight: 1024) == nil)

        let fitted = ViewTransform.make(source: picture, windowWidth: 800, windowHeight: 450, mode: .fit)
        #expect(fitted.partialCopy(of: ViewerRect(x: 0, y: 0, width: 10, height: 10), windowWidth: 800, windowHeight: 450) == nil)
    }

    @Test func anEmptyPictureMapsToItsOrigin() {
        let t = ViewTransform.make(source: ViewerRect(x: 0, y: 0, width: 0, height: 0), windowWidth: 0, windowHeight: 0, mode: .fit)
        #expect(t.remotePoint(windowX: 10, windowY: 10) == (0, 0))
    }
}

struct WheelAccumulatorTests {
    @Test func fractionsAddUpToWholeClicksAndAReversalStartsAfresh() {
        var wheel = WheelAccumulator()
        #expect(wheel.add(x: 0, y: 0.4) == (0, 0, 0, 0))
        #expect(wheel.add(x: 0, y: 0.4) == (0, 0, 0, 0))
        #expect(wheel.add(x: 0, y: 0.4) == (1, 0, 0, 0))     // 1.2: one click up, 0.2 kept
        #expect(wheel.add(x: 0, y: -0.5) == (0, 0, 0, 0))    // reversal drops the 0.2
        #expect(wheel.add(x: 0, y: -2.6) == (0, 3, 0, 0))
        #expect(wheel.add(x: 1.0, y: 0) == (0, 0, 0, 1))
        #expect(wheel.add(x: -3, y: 0) == (0, 0, 3, 0))
    }
}

struct KeyMappingTests {
    static let mask: Int32 = 1 << 30

    @Test func keysWithoutCharactersMapToTheirKeysyms() {
        #expect(KeyMapping.namedKey(keycode: 13, scancode: 40, numLock: false) == 0xFF0D)        // Return
        #expect(KeyMapping.namedKey(keycode: 8, scancode: 42, numLock: false) == 0xFF08)         // BackSpace
        #expect(KeyMapping.namedKey(keycode: 127, scancode: 76, numLock: false) == 0xFFFF)       // Delete
        #expect(KeyMapping.namedKey(keycode: Self.mask | 65, scancode: 65, numLock: false) == 0xFFC5)   // F8
        #expect(KeyMapping.namedKey(keycode: Self.mask | 82, scancode: 82, numLock: false) == 0xFF52)   // Up
        #expect(KeyMapping.namedKey(keycode: Self.mask | 225, scancode: 225, numLock: false) == 0xFFE1) // Shift_L
        // AltGr on a layout that has it is ISO_Level3_Shift; on one without it, Alt_R.
        #expect(KeyMapping.namedKey(keycode: Self.mask | 257, scancode: 230, numLock: false) == 0xFE03)
        #expect(KeyMapping.namedKey(keycode: Self.mask | 230, scancode: 230, numLock: false) == 0xFFEA)
    }

    @Test func keypadDigitsFollowNumLock() {
        #expect(KeyMapping.namedKey(keycode: Self.mask | 89, scancode: 89, numLock: true) == 0xFFB1)    // KP_1
        #expect(KeyMapping.namedKey(keycode: Self.mask | 89, scancode: 89, numLock: false) == 0xFF9C)   // KP_End
    }

    @Test func characterKeysAreLeftToTheirText() {
        #expect(KeyMapping.namedKey(keycode: 97, scancode: 4, numLock: false) == nil)      // a
        #expect(KeyMapping.namedKey(keycode: 0xF6, scancode: 51, numLock: false) == nil)   // ö on a German layout
        #expect(KeyMapping.character(keycode: 99) == "c")
        #expect(KeyMapping.character(keycode: 0) == nil, "a dead key has no character of its own")
        #expect(KeyMapping.character(keycode: Self.mask | 58) == nil)
        #expect(KeyMapping.isModifier(0xFFE3) && KeyMapping.isModifier(0xFE03) && !KeyMapping.isModifier(0x61))
    }
}

struct FrameStagingTests {
    @Test func onlyTheDirtyRectanglesAreCopiedAndDrainedOnce() {
        let staging = FrameStaging()
        var source = [UInt32](repeating: 0x111111, count: 8 * 4)
        source.withUnsafeBufferPointer { staging.stage(width: 8, height: 4, stride: 8, dirty: [], from: $0, arrival: 1, bytes: 10) }
        staging.drain { pending, pixels in
            #expect(pending.dirty == [ViewerRect(x: 0, y: 0, width: 8, height: 4)], "a new size is dirty everywhere")
            #expect(pending.generation == 1 && pending.oldestArrival == 1 && pending.bytes == 10)
            #expect(pixels.allSatisfy { $0 == 0x111111 })
        }
        for i in source.indices { source[i] = 0x222222 }
        source.withUnsafeBufferPointer {
            staging.stage(width: 8, height: 4, stride: 8, dirty: [ViewerRect(x: 2, y: 1, width: 3, height: 2), ViewerRect(x: 7, y: 3, width: 5, height: 5)],
                          from: $0, arrival: 2, bytes: 5)
        }
        staging.drain { pending, pixels in
            #expect(pending.generation == 1)
            #expect(pending.dirty == [ViewerRect(x: 2, y: 1, width: 3, height: 2), ViewerRect(x: 7, y: 3, width: 1, height: 1)], "clipped to the picture")
            let changed = pixels.enumerated().filter { $0.element == 0x222222 }.map { $0.offset }
            #expect(changed == [10, 11, 12, 18, 19, 20, 31], "nothing outside the dirty rectangles was copied")
        }
        staging.drain { pending, _ in
            #expect(pending.dirty.isEmpty && pending.oldestArrival == nil && pending.updates == 0)
        }
    }

    @Test func manyRectanglesMergeIntoTheirBoundingBox() {
        let staging = FrameStaging()
        let source = [UInt32](repeating: 7, count: 200 * 200)
        source.withUnsafeBufferPointer { staging.stage(width: 200, height: 200, stride: 200, dirty: [], from: $0, arrival: 0, bytes: 0) }
        staging.drain { _, _ in }
        let rects = (0..<100).map { ViewerRect(x: $0, y: $0, width: 1, height: 1) }
        source.withUnsafeBufferPointer { staging.stage(width: 200, height: 200, stride: 200, dirty: rects, from: $0, arrival: 0, bytes: 0) }
        staging.drain { pending, _ in #expect(pending.dirty == [ViewerRect(x: 0, y: 0, width: 100, height: 100)]) }
    }

    /// A producer that lends its own picture (as the VNC client lends its framebuffer), counting
    /// loans; `available` false plays a producer whose thread cannot lend just now.
    final class Producer: @unchecked Sendable {
        let lock = NSLock()
        var width: Int, height: Int
        var pixels: [UInt32]
        var loans = 0
        var available = true

        init(width: Int, height: Int, value: UInt32) {
            self.width = width
            self.height = height
            pixels = [UInt32](repeating: value, count: width * height)
        }

        func lend(_ body: (Int, Int, UnsafeBufferPointer<UInt32>) -> Void) -> Bool {
            lock.lock()
            defer { lock.unlock() }
            guard available else { return false }
            loans += 1
            pixels.withUnsafeBufferPointer { body(width, height, $0) }
            return true
        }
    }

    @Test func aLendingProducerIsReadAtUploadNotCopiedAtTheMark() {
        let staging = FrameStaging()
        let producer = Producer(width: 8, height: 4, value: 0x333333)
        staging.markChanged(width: 8, height: 4, dirty: [], arrival: 1, bytes: 3) { producer.lend($0) }
        #expect(producer.loans == 0, "marking copies nothing")
        // Changed after the mark: the upload sees the picture as it is when it happens.
        producer.pixels[9] = 0x444444
        staging.drain { pending, pixels in
            #expect(pending.dirty == [ViewerRect(x: 0, y: 0, width: 8, height: 4)] && pending.generation == 1 && pending.bytes == 3)
            #expect(pixels.count == 32 && pixels[9] == 0x444444 && pixels[0] == 0x333333)
        }
        #expect(producer.loans == 1)
        staging.drain { pending, pixels in #expect(pending.dirty.isEmpty && pixels.isEmpty) }
        #expect(producer.loans == 1, "nothing pending: nothing borrowed")
    }

    @Test func aLoanRefusedKeepsTheRectanglesForTheNextDrain() {
        let staging = FrameStaging()
        let producer = Producer(width: 8, height: 4, value: 1)
        staging.markChanged(width: 8, height: 4, dirty: [], arrival: 0, bytes: 0) { producer.lend($0) }
        staging.drain { _, _ in }
        staging.markChanged(width: 8, height: 4, dirty: [ViewerRect(x: 1, y: 1, width: 2, height: 2)], arrival: 5, bytes: 7) { producer.lend($0) }
        producer.available = false
        var uploads = 0
        staging.drain { _, _ in uploads += 1 }
        #expect(uploads == 0)
        #expect(!staging.read { _, _, _ in Issue.record("read without a loan") })
        producer.available = true
        staging.drain { pending, pixels in
            uploads += 1
            #expect(pending.dirty == [ViewerRect(x: 1, y: 1, width: 2, height: 2)] && pending.oldestArrival == 5 && pending.bytes == 7 && pending.updates == 1)
            #expect(pixels.count == 32)
        }
        #expect(uploads == 1)
    }

    @Test func theKeptPictureServesAfterTheProducerLeaves() {
        let staging = FrameStaging()
        let producer = Producer(width: 4, height: 2, value: 9)
        staging.markChanged(width: 4, height: 2, dirty: [], arrival: 0, bytes: 0) { producer.lend($0) }
        // Rows 5 words apart in the producer's last picture: only 4 of each are the picture.
        let last: [UInt32] = [1, 2, 3, 4, 99, 5, 6, 7, 8]
        last.withUnsafeBufferPointer { staging.keep(width: 4, height: 2, stride: 5, from: $0) }
        producer.available = false
        staging.drain { pending, pixels in
            #expect(pending.dirty == [ViewerRect(x: 0, y: 0, width: 4, height: 2)], "still pending from the mark")
            #expect(Array(pixels) == [1, 2, 3, 4, 5, 6, 7, 8])
        }
        var seen: [UInt32] = []
        #expect(staging.read { _, _, pixels in seen = Array(pixels) })
        #expect(seen == [1, 2, 3, 4, 5, 6, 7, 8] && producer.loans == 0)
    }

    @Test func aLoanOfAnotherSizeUploadsNothingAndTheResizeMarkRedrawsAll() {
        let staging = FrameStaging()
        let producer = Producer(width: 8, height: 4, value: 1)
        staging.markChanged(width: 8, height: 4, dirty: [], arrival: 0, bytes: 0) { producer.lend($0) }
        staging.drain { _, _ in }
        staging.markChanged(width: 8, height: 4, dirty: [ViewerRect(x: 0, y: 0, width: 2, height: 2)], arrival: 0, bytes: 0) { producer.lend($0) }
        // The desktop grew before the window drained; its mark comes after.
        producer.width = 10
        producer.pixels = [UInt32](repeating: 2, count: 40)
        var uploads = 0
        staging.drain { _, _ in uploads += 1 }
        #expect(uploads == 0, "rectangles of the old size are not drawn over the new picture")
        staging.markChanged(width: 10, height: 4, dirty: [], arrival: 0, bytes: 0) { producer.lend($0) }
        staging.drain { pending, pixels in
            uploads += 1
            #expect(pending.generation == 2 && pending.dirty == [ViewerRect(x: 0, y: 0, width: 10, height: 4)] && pixels.count == 40)
        }
        #expect(uploads == 1)
    }
}

struct ViewerMenuTests {
    let settings = ViewerMenu.Settings(fullscreen: false, viewOnly: false, viewOnlyLocked: false, scale: .fit, monitor: nil, monitorCount: 2,
                                       clipboardSync: true, keyboardGrab: false, hud: false)

    @Test func togglesCycleAndCommands() {
        guard case .changed(let s1) = ViewerMenu.choose(.scale, settings) else { Issue.record("scale"); return }
        #expect(s1.scale == .oneToOne)
        guard case .changed(let s2) = ViewerMenu.choose(.monitor, settings), case .changed(let s3) = ViewerMenu.choose(.monitor, s2),
              case .changed(let s4) = ViewerMenu.choose(.monitor, s3) else { Issue.record("monitor"); return }
        #expect(s2.monitor == 0 && s3.monitor == 1 && s4.monitor == nil, "all → 1 → 2 → all")
        #expect(ViewerMenu.choose(.sendCtrlAltDel, settings) == .command(.pressKeys([0xFFE3, 0xFFE9, 0xFFFF])))
        #expect(ViewerMenu.choose(.disconnect, settings) == .command(.disconnect))
        #expect(ViewerMenu.label(.monitor, s2) == "Monitor: 1 of 2")
        guard case .changed(let relative) = ViewerMenu.choose(.relativePointer, settings) else { Issue.record("relative pointer"); return }
        #expect(relative.relativePointer && ViewerMenu.label(.relativePointer, relative) == "Relative pointer: on")
    }

    @Test func theStatisticsItemWalksTheCornersThenTurnsTheOverlayOff() {
        var s = settings
        var seen: [String] = [ViewerMenu.label(.hud, s)]
        for _ in 0..<5 {
            guard case .changed(let next) = ViewerMenu.choose(.hud, s) else { Issue.record("hud"); return }
            s = next
            seen.append(ViewerMenu.label(.hud, s))
        }
        #expect(seen == ["Statistics overlay: off", "Statistics overlay: top left", "Statistics overlay: top right",
                         "Statistics overlay: bottom right", "Statistics overlay: bottom left", "Statistics overlay: off"])
        // Shown from the start in a corner of the command line's choosing, the walk goes on from there.
        var started = settings
        started.hud = true
        started.hudCorner = .bottomRight
        guard case .changed(let next) = ViewerMenu.choose(.hud, started) else { Issue.record("hud"); return }
        #expect(next.hud && next.hudCorner == .bottomLeft)
    }

    @Test func viewOnlyFromTheCommandLineStaysOn() {
        var locked = settings
        locked.viewOnly = true
        locked.viewOnlyLocked = true
        #expect(ViewerMenu.choose(.viewOnly, locked) == .closeMenu)
        #expect(ViewerMenu.label(.viewOnly, locked).contains("--view-only"))
        var menu = ViewerMenu()
        menu.move(by: -1)
        #expect(menu.selected == menu.items.count - 1, "up from the first item wraps to the last")
    }

    @Test func theProtocolSideAddsItemsAndHidesOnes() {
        let menu = ViewerMenu(actions: ["Mode: 1280x720x60", "Bitrate: a quarter lower"], hidden: [.monitor, .clipboard, .reconnect])
        #expect(!menu.items.contains(.monitor) && !menu.items.contains(.clipboard) && !menu.items.contains(.reconnect))
        let at = menu.items.firstIndex(of: .action("Mode: 1280x720x60"))
        #expect(at == 8 && menu.items[9] == .action("Bitrate: a quarter lower") && menu.items[10] == .disconnect, "\(menu.items)")
        #expect(ViewerMenu.label(.action("Mode: 1280x720x60"), settings) == "Mode: 1280x720x60")
        #expect(ViewerMenu.choose(.action("Mode: 1280x720x60"), settings) == .command(.action("Mode: 1280x720x60")))
        #expect(ViewerMenu().items == ViewerMenu.Item.standard)
    }
}

struct PresentationStatsTests {
    @Test func ratesAndQuantiles() {
        var stats = PresentationStats()
        _ = stats.rates(now: 0)
        stats.recordUpdates(10, bytes: 1_000_000)
        let r = stats.rates(now: 1)
        #expect(r.updatesPerSecond == 10 && r.megabitsPerSecond == 8)
        #expect(stats.latency(quantile: 0.5) == nil)
        for ms in 1...100 { stats.recordPresent(latency: Double(ms) / 1000) }
        stats.recordPresent(latency: nil)
        #expect(stats.framesPresented == 101)
        #expect(stats.latency(quantile: 0.5) == 0.051 || stats.latency(quantile: 0.5) == 0.050)
        #expect(stats.latency(quantile: 0.95) == 0.095 || stats.latency(quantile: 0.95) == 0.096)
        #expect(stats.latencies(quantiles: 0.5, 0.95) == [stats.latency(quantile: 0.5)!, stats.latency(quantile: 0.95)!])
        #expect(PresentationStats().latencies(quantiles: 0.5, 0.95).isEmpty)
    }

    /// The quantiles come from a window kept sorted as presents come and go: they must equal
    /// those of the last `window` latencies sorted afresh, repeats and evictions included.
    @Test func quantilesFollowTheWindowAsItSlides() {
        var stats = PresentationStats(window: 64)
        var generator = SystemRandomNumberGenerator()
        var recent: [Double] = []
        for step in 0..<2000 {
            // Few distinct values, so equal latencies enter and leave the window often.
            let latency = Double(Int.random(in: 0..<40, using: &generator)) / 1000
            stats.recordPresent(latency: latency)
            recent.append(latency)
            if recent.count > 64 { recent.removeFirst() }
            let sorted = recent.sorted()
            let expected = [0.0, 0.5, 0.95, 1.0].map { q in sorted[min(sorted.count - 1, Int((q * Double(sorted.count - 1)).rounded()))] }
            #expect(stats.latencies(quantiles: 0.0, 0.5, 0.95, 1.0) == expected, "step \(step)")
            if stats.latencies(quantiles: 0.0, 0.5, 0.95, 1.0) != expected { return }
        }
        #expect(stats.latencies == recent)
    }
}

struct ViewerCursorScalingTests {
    /// A 4×4 cursor: the left half opaque red, the right half transparent; hotspot (1, 2).
    let cursor: ViewerCursor = {
        var rgba = [UInt8](repeating: 0, count: 4 * 4 * 4)
        for y in 0..<4 { for x in 0..<2 { let i = (y * 4 + x) * 4; rgba[i] = 255; rgba[i + 3] = 255 } }
        return ViewerCursor(width: 4, height: 4, hotspotX: 1, hotspotY: 2, rgba: rgba)
    }()

    @Test func unscaledIsUnchanged() {
        #expect(cursor.scaled(by: 1) == cursor)
        #expect(cursor.scaled(by: .nan) == cursor, "a nonsensical factor leaves the cursor alone")
    }

    @Test func doubledKeepsColoursAndMovesTheHotspot() {
        let big = cursor.scaled(by: 2)
        #expect(big.width == 8 && big.height == 8 && big.rgba.count == 8 * 8 * 4)
        #expect(big.hotspotX == 2 && big.hotspotY == 4)
        func pixel(_ x: Int, _ y: Int) -> [UInt8] { Array(big.rgba[(y * 8 + x) * 4..<(y * 8 + x) * 4 + 4]) }
        #expect(pixel(0, 0) == [255, 0, 0, 255] && pixel(2, 5) == [255, 0, 0, 255], "inside the red half stays opaque red")
        #expect(pixel(7, 7)[3] == 0, "inside the transparent half stays transparent")
        // At the edge alpha blends, but the colour does not darken toward the transparent
        // (black) pixels: premultiplied filtering.
        let edge = pixel(4, 3)
        #expect(edge[3] > 0 && edge[3] < 255 && edge[0] == 255 && edge[1] == 0, "edge pixel \(edge)")
    }

    @Test func halvedAndClamped() {
        let small = cursor.scaled(by: 0.5)
        #expect(small.width == 2 && small.height == 2 && small.hotspotX == 0 && small.hotspotY == 1)
        let huge = cursor.scaled(by: 1000)
        #expect(huge.width == 32 && huge.height == 32, "at most 8× (and never past 256 pixels)")
        let large = ViewerCursor(width: 200, height: 10, hotspotX: 199, hotspotY: 9, rgba: [UInt8](repeating: 255, count: 200 * 10 * 4)).scaled(by: 4)
        #expect(large.width == 256 && large.hotspotX < large.width && large.hotspotY < large.height)
    }

    @Test func transformScaleIsWindowPixelsPerRemotePixel() {
        let t = ViewTransform.make(source: ViewerRect(x: 0, y: 0, width: 800, height: 600), windowWidth: 400, windowHeight: 400, mode: .fit)
        #expect(t.scale.x == 0.5 && t.scale.y == 0.5)
        let fill = ViewTransform.make(source: ViewerRect(x: 0, y: 0, width: 800, height: 600), windowWidth: 1600, windowHeight: 600, mode: .fill)
        #expect(fill.scale.x == 2 && fill.scale.y == 1)
    }
}
