#if canImport(CSDL2)
import CSDL2
import Foundation

/// Text for the overlays (HUD, menu, status banner) through SDL2_ttf: lines rendered once into
/// a texture and redrawn until the text changes.
final class TextOverlay {
    private let font: OpaquePointer
    let lineHeight: Int32
    private var cache: [String: (texture: OpaquePointer, width: Int32, height: Int32)] = [:]

    /// Where Debian puts DejaVu Sans Mono (fonts-dejavu-core), then other common places.
    static let defaultFonts = [
        "/usr/share/fonts/truetype/dejavu/DejaVuSansMono.ttf",
        "/usr/share/fonts/TTF/DejaVuSansMono.ttf",
        "/usr/share/fonts/dejavu/DejaVuSansMono.ttf",
        "/System/Library/Fonts/Menlo.ttc",
    ]

    /// nil when no font can be opened (the window then runs without overlays and says so once).
    init?(path: String?, size: Int32) {
        if TTF_WasInit() == 0 && TTF_Init() != 0 { return nil }
        let candidates = path.map { [$0] } ?? Self.defaultFonts
        guard let font = candidates.lazy.compactMap({ TTF_OpenFont($0, size) }).first else { return nil }
        self.font = font
        lineHeight = TTF_FontLineSkip(font)
    }

    deinit {
        for entry in cache.values { SDL_DestroyTexture(entry.texture) }
        TTF_CloseFont(font)
    }

    /// Draws one line with its top-left corner at (x, y); returns its width.
    @discardableResult
    func draw(_ text: String, x: Int32, y: Int32, renderer: OpaquePointer, color: SDL_Color = SDL_Color(r: 255, g: 255, b: 255, a: 255)) -> Int32 {
        guard !text.isEmpty else { return 0 }
        let key = "\(color.r),\(color.g),\(color.b)|" + text
        if cache[key] == nil {
            if cache.count > 256 { flush() }
            guard let surface = TTF_RenderUTF8_Blended(font, text, color) else { return 0 }
            defer { SDL_FreeSurface(surface) }
            guard let texture = SDL_CreateTextureFromSurface(renderer, surface) else { return 0 }
            cache[key] = (texture, surface.pointee.w, surface.pointee.h)
        }
        let entry = cache[key]!
        var dst = SDL_Rect(x: x, y: y, w: entry.width, h: entry.height)
        SDL_RenderCopy(renderer, entry.texture, nil, &dst)
        return entry.width
    }

    func width(of text: String) -> Int32 {
        var w: Int32 = 0, h: Int32 = 0
        TTF_SizeUTF8(font, text, &w, &h)
        return w
    }

    /// Drops every cached line (the renderer is going away, or too many lines piled up).
    func flush() {
        for entry in cache.values { SDL_DestroyTexture(entry.texture) }
        cache = [:]
    }
}
#endif
