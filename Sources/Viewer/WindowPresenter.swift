#if canImport(CSDL2)
import CSDL2
import Foundation
import ViewerKernels

/// The picture part of a window: the texture the staged pixels are uploaded into, the view
/// (scale, monitor, pan) that maps it onto the window, the two ways of presenting (the whole
/// window through the renderer; or, with SDL's software renderer at 1:1 and nothing over the
/// picture, only the changed rectangles, written straight into the window surface), the
/// presentation statistics and the remote cursor at the picture's scale. Lives on the window
/// thread; `WindowLoop` tells it what is over the picture.
final class WindowPresenter {
    let window: OpaquePointer
    let renderer: OpaquePointer
    let rendererName: String
    private var texture: OpaquePointer?
    private var textureGeneration = -1
    /// The texture holds whole YUV pictures (`show`), not staged XRGB pixels.
    private var textureLayout: ViewerPictureLayout?
    private(set) var remoteWidth = 0
    private(set) var remoteHeight = 0
    /// The remote desktop's monitors (for the menu's monitor choice).
    var screens: [ViewerRect] = []
    private var pan = (x: 0, y: 0)
    /// The whole window must be drawn again (size, overlays, exposure, settings).
    var needsRedraw = true
    /// Parts of the picture (remote coordinates) uploaded since the last present.
    private var damage: [ViewerRect] = []
    /// The renderer draws into the window's own surface (SDL's software renderer), so a present
    /// can send only the changed rectangles to the display instead of the whole window.
    private let presentsPartially: Bool
    private var partialFrames = 0
    /// Window rectangles already written into the window surface straight from the stage
    /// (software renderer, 1:1, no overlay), to be sent to the display by the next present.
    private var drawnDirectly: [SDL_Rect] = []
    /// Remote rectangles written to the window surface but not to the texture: the texture is
    /// brought up to date from the stage before it is next drawn.
    private var staleInTexture: [ViewerRect] = []
    private var stats = PresentationStats()
    private var sdlCursor: OpaquePointer?
    /// The remote cursor as it came, and the factor it is shown at (the picture's scale).
    private var cursorImage: ViewerCursor = .dot
    private var cursorScale = 1.0

    init(window: OpaquePointer, renderer: OpaquePointer) {
        self.window = window
        self.renderer = renderer
        var info = SDL_RendererInfo()
        SDL_GetRendererInfo(renderer, &info)
        rendererName = info.name.map { String(cString: $0) } ?? "unknown"
        presentsPartially = rendererName == "software"
    }

    /// Frees the texture and cursor (the loop then destroys the renderer and window).
    func destroy() {
        if let texture { SDL_DestroyTexture(texture) }
        if let sdlCursor { SDL_FreeCursor(sdlCursor) }
    }

    /// Something to present: a whole redraw, or changed rectangles.
    var hasWork: Bool { needsRedraw || !damage.isEmpty || !drawnDirectly.isEmpty }

    // MARK: - The view

    func transform(_ settings: ViewerMenu.Settings) -> ViewTransform {
        let size = outputSize()
        return ViewTransform.make(source: sourceRect(settings), windowWidth: size.width, windowHeight: size.height, mode: settings.scale, pan: pan)
    }

    /// Window (logical) coordinates → renderer output pixels (they differ on HiDPI displays).
    func outputPoint(x: Double, y: Double) -> (Double, Double) {
        var ww: Int32 = 0, wh: Int32 = 0
        SDL_GetWindowSize(window, &ww, &wh)
        let out = outputSize()
        guard ww > 0, wh > 0 else { return (x, y) }
        return (x * Double(out.width) / Double(ww), y * Double(out.height) / Double(wh))
    }

    /// A 1:1 view larger than the window scrolls with the pointer: the pointer's place in the
    /// window is its place in the picture.
    func panFollowing(x: Double, y: Double, _ settings: ViewerMenu.Settings) {
        let size = outputSize(), source = sourceRect(settings)
        let nx = source.width > size.width ? Int(x / Double(max(1, size.width)) * Double(source.width - size.width)) : 0
        let ny = source.height > size.height ? Int(y / Double(max(1, size.height)) * Double(source.height - size.height)) : 0
        if nx != pan.x || ny != pan.y { pan = (nx, ny); needsRedraw = true }
    }

    func resetPan() { pan = (0, 0) }

    func sourceRect(_ settings: ViewerMenu.Settings) -> ViewerRect {
        let all = ViewerRect(x: 0, y: 0, width: remoteWidth, height: remoteHeight)
        guard let m = settings.monitor, screens.indices.contains(m) else { return all }
        let r = screens[m].intersection(all)
        return r.isEmpty ? all : r
    }

    func outputSize() -> (width: Int, height: Int) {
        var w: Int32 = 0, h: Int32 = 0
        SDL_GetRendererOutputSize(renderer, &w, &h)
        return (Int(w), Int(h))
    }

    /// Makes the window the picture's size (within the display), unless full screen or the
    /// remote desktop follows the window.
    func fitWindowToPicture(_ settings: ViewerMenu.Settings, remoteFollowsWindow: Bool) {
        needsRedraw = true
        guard !settings.fullscreen, !remoteFollowsWindow else { return }
        let source = sourceRect(settings)
        guard !source.isEmpty else { return }
        var bounds = SDL_Rect()
        let display = max(0, SDL_GetWindowDisplayIndex(window))
        var w = Int32(source.width), h = Int32(source.height)
        let haveBounds = SDL_GetDisplayUsableBounds(display, &bounds) == 0
        if haveBounds {
            w = min(w, bounds.w)
            h = min(h, bounds.h)
        }
        SDL_SetWindowSize(window, w, h)
        // Grown in place, the window may now reach past the screen's edge: move it back in.
        if haveBounds {
            var x: Int32 = 0, y: Int32 = 0
            SDL_GetWindowPosition(window, &x, &y)
            let nx = max(bounds.x, min(x, bounds.x + bounds.w - w)), ny = max(bounds.y, min(y, bounds.y + bounds.h - h))
            if nx != x || ny != y { SDL_SetWindowPosition(window, nx, ny) }
        }
    }

    // MARK: - Upload and present

    /// Uploads what was staged into the texture (or, when the picture is alone in the window,
    /// straight into the window surface). Returns the arrival time of the oldest update it
    /// contained (the start of this present's latency; nil when nothing was new) and whether
    /// the remote picture changed size.
    func upload(from frames: FrameStaging, _ settings: ViewerMenu.Settings, pictureAlone: Bool) -> (oldest: Double?, resized: Bool) {
        var resized = false
        var oldest: Double?
        let direct = pictureAlone ? directSurface(settings) : nil
        frames.drain { pending, pixels in
            guard pending.width > 0, pending.height > 0 else { return }
            if pending.generation != textureGeneration || texture == nil || textureLayout != nil {
                if let texture { SDL_DestroyTexture(texture) }
                texture = SDL_CreateTexture(renderer, SDL_PIXELFORMAT_XRGB8888.rawValue, Int32(SDL_TEXTUREACCESS_STREAMING.rawValue),
                                            Int32(pending.width), Int32(pending.height))
                textureGeneration = pending.generation
                textureLayout = nil
                needsRedraw = true
                resized = pending.width != remoteWidth || pending.height != remoteHeight
                remoteWidth = pending.width
                remoteHeight = pending.height
            }
            guard let texture else { return }
            if let direct, !needsRedraw {
                // One copy, picture → window surface, instead of picture → texture → surface.
                for rect in pending.dirty {
                    staleInTexture.append(rect)
                    guard let copy = direct.transform.partialCopy(of: rect, windowWidth: direct.width, windowHeight: direct.height) else { continue }
                    let src = pixels.baseAddress! + copy.source.y * pending.width + copy.source.x
                    let dst = direct.pixels + copy.window.y * direct.pitch + copy.window.x * 4
                    viewer_copy_rows_streaming(dst, direct.pitch, src, pending.width, copy.window.width, copy.window.height)
                    drawnDirectly.append(SDL_Rect(x: Int32(copy.window.x), y: Int32(copy.window.y),
                                                  w: Int32(copy.window.width), h: Int32(copy.window.height)))
                }
                if staleInTexture.count > FrameStaging.maximumRects {
                    staleInTexture = [staleInTexture.reduce(ViewerRect(x: 0, y: 0, width: 0, height: 0)) { $0.union($1) }]
                }
            } else if !pixels.isEmpty {
                for rect in staleInTexture + pending.dirty {
                    let r0 = rect.intersection(ViewerRect(x: 0, y: 0, width: pending.width, height: pending.height))
                    guard !r0.isEmpty else { continue }
                    var r = SDL_Rect(x: Int32(r0.x), y: Int32(r0.y), w: Int32(r0.width), h: Int32(r0.height))
                    SDL_UpdateTexture(texture, &r, pixels.baseAddress! + r0.y * pending.width + r0.x, Int32(pending.width * 4))
                }
                staleInTexture = []
                damage += pending.dirty
            }
            stats.recordUpdates(pending.updates, bytes: pending.bytes)
            if !pending.dirty.isEmpty { oldest = pending.oldestArrival }
        }
        return (oldest, resized)
    }

    /// Uploads a whole YUV picture into a texture of its layout (made anew when the size or
    /// layout changes); SDL converts it to RGB where it draws (on the GPU when there is one).
    /// Returns whether the picture changed size, or nil when SDL refused it.
    func upload(picture: any ViewerPicture) -> Bool? {
        let width = picture.width, height = picture.height, layout = picture.layout
        guard width > 0, height > 0 else { return nil }
        var resized = false
        if texture == nil || textureLayout != layout || width != remoteWidth || height != remoteHeight {
            if let texture { SDL_DestroyTexture(texture) }
            let format = layout == .i420 ? SDL_PIXELFORMAT_IYUV : SDL_PIXELFORMAT_NV12
            texture = SDL_CreateTexture(renderer, format.rawValue, Int32(SDL_TEXTUREACCESS_STREAMING.rawValue), Int32(width), Int32(height))
            textureLayout = layout
            textureGeneration = -1
            staleInTexture = []
            resized = width != remoteWidth || height != remoteHeight
            remoteWidth = width
            remoteHeight = height
        }
        guard let texture else { return nil }
        let colour = picture.colour
        let mode: SDL_YUV_CONVERSION_MODE
        switch colour.matrix {
        case .bt601: mode = colour.fullRange ? SDL_YUV_CONVERSION_JPEG : SDL_YUV_CONVERSION_BT601
        // SDL 2 has no BT.2020 matrix: BT.709's is the nearest it has (a slight hue shift on saturated colours).
        case .bt709, .bt2020: mode = SDL_YUV_CONVERSION_BT709
        }
        SDL_SetYUVConversionMode(mode)
        let status: Int32 = picture.withPlanes { planes, pitches in
            switch layout {
            case .i420:
                guard planes.count >= 3, pitches.count >= 3 else { return -1 }
                return SDL_UpdateYUVTexture(texture, nil, planes[0], Int32(pitches[0]), planes[1], Int32(pitches[1]), planes[2], Int32(pitches[2]))
            case .nv12:
                guard planes.count >= 2, pitches.count >= 2 else { return -1 }
                return SDL_UpdateNVTexture(texture, nil, planes[0], Int32(pitches[0]), planes[1], Int32(pitches[1]))
            }
        }
        guard status == 0 else { return nil }
        stats.recordUpdates(1, bytes: 0)
        needsRedraw = true
        return resized
    }

    /// Shows what changed: only the changed rectangles when the picture is alone in the window
    /// and the renderer allows it, the whole window (picture, then `drawOverlays`) otherwise.
    /// Returns the statistics after this present.
    func present(latencyStart: Double?, from frames: FrameStaging, _ settings: ViewerMenu.Settings, pictureAlone: Bool,
                 drawOverlays: (OpaquePointer, (width: Int, height: Int)) -> Void) -> ViewerStatistics {
        if !staleInTexture.isEmpty && (needsRedraw || !damage.isEmpty) { syncTexture(from: frames) }
        if needsRedraw {
            presentWhole(settings, drawOverlays)
        } else if !drawnDirectly.isEmpty && damage.isEmpty && SDL_UpdateWindowSurfaceRects(window, drawnDirectly, Int32(drawnDirectly.count)) == 0 {
            partialFrames += 1
        } else if presentsPartially && pictureAlone && presentDamage(settings) {
            partialFrames += 1
        } else {
            if !staleInTexture.isEmpty { syncTexture(from: frames) }
            presentWhole(settings, drawOverlays)
        }
        drawnDirectly = []
        damage = []
        needsRedraw = false
        let latency = latencyStart.map { ViewerWindow.now() - $0 }
        stats.recordPresent(latency: latency)
        let quantiles = stats.latencies(quantiles: 0.5, 0.95)
        return ViewerStatistics(framesPresented: stats.framesPresented, partialFrames: partialFrames, updates: stats.updates,
                                latencyP50Milliseconds: quantiles.first.map { $0 * 1000 },
                                latencyP95Milliseconds: quantiles.last.map { $0 * 1000 }, renderer: rendererName)
    }

    /// The window surface, when updates can be written into it straight from the stage: SDL's
    /// software renderer draws there (so the surface is what the display shows), the view is
    /// 1:1, and the surface's pixels are the stage's (32-bit XRGB).
    private func directSurface(_ settings: ViewerMenu.Settings) -> (pixels: UnsafeMutableRawPointer, pitch: Int, width: Int, height: Int, transform: ViewTransform)? {
        guard presentsPartially, !needsRedraw, texture != nil, remoteWidth > 0 else { return nil }
        let t = transform(settings)
        guard t.isUnscaled, let surface = SDL_GetWindowSurface(window), let pixels = surface.pointee.pixels,
              surface.pointee.format.pointee.format == SDL_PIXELFORMAT_XRGB8888.rawValue, surface.pointee.flags & UInt32(SDL_RLEACCEL) == 0 else { return nil }
        let size = outputSize()
        guard Int(surface.pointee.w) == size.width, Int(surface.pointee.h) == size.height else { return nil }
        return (pixels, Int(surface.pointee.pitch), size.width, size.height, t)
    }

    /// Brings the texture up to date with what was written to the window surface directly.
    private func syncTexture(from frames: FrameStaging) {
        guard let texture else { staleInTexture = []; return }
        let read = frames.read { width, height, pixels in
            for rect in staleInTexture {
                let r0 = rect.intersection(ViewerRect(x: 0, y: 0, width: width, height: height))
                guard !r0.isEmpty else { continue }
                var r = SDL_Rect(x: Int32(r0.x), y: Int32(r0.y), w: Int32(r0.width), h: Int32(r0.height))
                SDL_UpdateTexture(texture, &r, pixels.baseAddress! + r0.y * width + r0.x, Int32(width * 4))
            }
        }
        // Unreadable just now (the producer could not lend its picture): tried again next present.
        if read { staleInTexture = [] }
    }

    /// Only the changed rectangles, copied into the window's surface and sent to the display
    /// (what a full present costs per frame — clearing, copying and sending the whole window —
    /// is most of the viewer's CPU when updates are small). False when that cannot be done:
    /// a scaled view.
    private func presentDamage(_ settings: ViewerMenu.Settings) -> Bool {
        guard let texture, remoteWidth > 0 else { return false }
        let t = transform(settings)
        guard t.isUnscaled else { return false }
        let size = outputSize()
        var sent: [SDL_Rect] = []
        for rect in damage {
            guard let copy = t.partialCopy(of: rect, windowWidth: size.width, windowHeight: size.height) else { continue }
            var src = SDL_Rect(x: Int32(copy.source.x), y: Int32(copy.source.y), w: Int32(copy.source.width), h: Int32(copy.source.height))
            var dst = SDL_Rect(x: Int32(copy.window.x), y: Int32(copy.window.y), w: Int32(copy.window.width), h: Int32(copy.window.height))
            SDL_RenderCopy(renderer, texture, &src, &dst)
            sent.append(dst)
        }
        SDL_RenderFlush(renderer)
        guard !sent.isEmpty else { return true }
        // A surface SDL invalidated (a resize not yet seen as an event) refuses: draw it whole.
        return SDL_UpdateWindowSurfaceRects(window, sent, Int32(sent.count)) == 0
    }

    private func presentWhole(_ settings: ViewerMenu.Settings, _ drawOverlays: (OpaquePointer, (width: Int, height: Int)) -> Void) {
        SDL_SetRenderDrawColor(renderer, 0, 0, 0, 255)
        SDL_RenderClear(renderer)
        if let texture, remoteWidth > 0 {
            let t = transform(settings)
            updateCursorScale(t)
            SDL_SetTextureScaleMode(texture, t.isUnscaled ? SDL_ScaleModeNearest : SDL_ScaleModeLinear)
            var src = SDL_Rect(x: Int32(t.source.x), y: Int32(t.source.y), w: Int32(t.source.width), h: Int32(t.source.height))
            var dst = SDL_Rect(x: Int32(t.destination.x), y: Int32(t.destination.y), w: Int32(t.destination.width), h: Int32(t.destination.height))
            SDL_RenderCopy(renderer, texture, &src, &dst)
        }
        drawOverlays(renderer, outputSize())
        SDL_RenderPresent(renderer)
    }

    /// The presentation's figures for the HUD: update and bit rates since the last call, the
    /// update→present latency, the picture and how it is shown.
    func hudLines(now: Double, _ settings: ViewerMenu.Settings) -> [String] {
        let rates = stats.rates(now: now)
        let shape = "\(remoteWidth)x\(remoteHeight)  \(settings.scale.rawValue)  \(rendererName)  frames \(stats.framesPresented)"
        // Whole pictures (a video stream): its own lines say rates and latency, from capture.
        if textureLayout != nil { return [shape] }
        func ms(_ q: Double) -> String { stats.latency(quantile: q).map { String(format: "%.1f", $0 * 1000) } ?? "–" }
        return [
            String(format: "%.1f updates/s  %.2f Mbit/s", rates.updatesPerSecond, rates.megabitsPerSecond),
            "update→present p50 \(ms(0.5)) ms  p95 \(ms(0.95)) ms",
            shape,
        ]
    }

    // MARK: - Cursor

    func setCursor(_ cursor: ViewerCursor, _ settings: ViewerMenu.Settings) {
        cursorImage = cursor
        cursorScale = Self.cursorFactor(transform(settings), window: window, output: outputSize())
        showCursor(cursor.scaled(by: cursorScale))
    }

    /// The cursor drawn at the picture's scale (in window points, which may differ from
    /// output pixels on HiDPI displays).
    private static func cursorFactor(_ t: ViewTransform, window: OpaquePointer, output: (width: Int, height: Int)) -> Double {
        var ww: Int32 = 0, wh: Int32 = 0
        SDL_GetWindowSize(window, &ww, &wh)
        let points = output.width > 0 ? Double(ww) / Double(output.width) : 1
        let factor = min(t.scale.x, t.scale.y) * points
        // Within 2 % of 1:1 the cursor keeps its exact pixels.
        return abs(factor - 1) < 0.02 ? 1 : factor
    }

    /// Follows the picture's scale with the cursor's size (window resized, scaling changed).
    private func updateCursorScale(_ t: ViewTransform) {
        let factor = Self.cursorFactor(t, window: window, output: outputSize())
        guard abs(factor - cursorScale) > 0.01 else { return }
        cursorScale = factor
        showCursor(cursorImage.scaled(by: factor))
    }

    private func showCursor(_ cursor: ViewerCursor) {
        if cursor.width == 0 || cursor.height == 0 || cursor.rgba.count < cursor.width * cursor.height * 4 {
            SDL_ShowCursor(SDL_DISABLE)
            return
        }
        var rgba = cursor.rgba
        let created: OpaquePointer? = rgba.withUnsafeMutableBytes { raw in
            // R, G, B, A bytes in memory: SDL's ABGR8888 on a little-endian machine.
            guard let surface = SDL_CreateRGBSurfaceWithFormatFrom(raw.baseAddress, Int32(cursor.width), Int32(cursor.height), 32,
                                                                    Int32(cursor.width * 4), SDL_PIXELFORMAT_RGBA32.rawValue) else { return nil }
            defer { SDL_FreeSurface(surface) }
            return SDL_CreateColorCursor(surface, Int32(cursor.hotspotX), Int32(cursor.hotspotY))
        }
        guard let created else { return }
        SDL_SetCursor(created)
        SDL_ShowCursor(SDL_ENABLE)
        if let sdlCursor { SDL_FreeCursor(sdlCursor) }
        sdlCursor = created
    }
}
#endif
