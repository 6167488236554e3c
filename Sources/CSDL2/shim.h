// SDL2 and SDL2_ttf for the Viewer module (Debian: libsdl2-dev, libsdl2-ttf-dev). No pkgConfig in
// Package.swift: sdl2.pc adds -D_REENTRANT, which SwiftPM refuses with a warning on every build.
// Declarations only: nothing links the libraries; CSDL2Loader opens them when a window opens.
#pragma once
#define SDL_MAIN_HANDLED 1
#include <SDL2/SDL.h>
#include <SDL2/SDL_ttf.h>

// Function-like macros and compound constants Swift cannot import.
static inline int csdl_windowpos_centered(void) { return (int)SDL_WINDOWPOS_CENTERED; }
static inline Uint32 csdl_button_mask(int button) { return SDL_BUTTON(button); }
static inline int csdl_is_scancode_key(SDL_Keycode code) { return (code & SDLK_SCANCODE_MASK) != 0; }
