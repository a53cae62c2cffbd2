//===- SvgToPng.cpp - planc --timeline=FILE.png ---------------------------===//

#include "SvgToPng.h"

#ifdef PLAN_HAVE_RSVG
#include <cairo.h>
#include <librsvg/rsvg.h>

#include <cmath>
#include <memory>
#endif

namespace plan {

#ifdef PLAN_HAVE_RSVG

const char *whyNoPng() { return nullptr; }

bool renderSvgToPng(std::string_view svg, double scale, std::string &png,
                    std::string &error) {
  GError *gerror = nullptr;
  std::unique_ptr<RsvgHandle, decltype(&g_object_unref)> handle(
      rsvg_handle_new_from_data(reinterpret_cast<const guint8 *>(svg.data()),
                                svg.size(), &gerror),
      g_object_unref);
  auto failed = [&](const char *what) {
    error = std::string(what) +
            (gerror ? std::string(": ") + gerror->message : std::string());
    if (gerror)
      g_error_free(gerror);
    return false;
  };
  if (!handle)
    return failed("librsvg cannot read the timeline's SVG");
  double width = 0, height = 0;
  if (!rsvg_handle_get_intrinsic_size_in_pixels(handle.get(), &width,
                                                &height) ||
      width <= 0 || height <= 0)
    return failed("the timeline's SVG has no size in pixels");
  int w = static_cast<int>(std::ceil(width * scale));
  int h = static_cast<int>(std::ceil(height * scale));
  std::unique_ptr<cairo_surface_t, decltype(&cairo_surface_destroy)> surface(
      cairo_image_surface_create(CAIRO_FORMAT_ARGB32, w, h),
      cairo_surface_destroy);
  std::unique_ptr<cairo_t, decltype(&cairo_destroy)> cr(
      cairo_create(surface.get()), cairo_destroy);
  RsvgRectangle viewport{0, 0, static_cast<double>(w), static_cast<double>(h)};
  if (!rsvg_handle_render_document(handle.get(), cr.get(), &viewport, &gerror))
    return failed("librsvg cannot render the timeline");
  png.clear();
  cairo_status_t status = cairo_surface_write_to_png_stream(
      surface.get(),
      [](void *closure, const unsigned char *data, unsigned int length) {
        static_cast<std::string *>(closure)->append(
            reinterpret_cast<const char *>(data), length);
        return CAIRO_STATUS_SUCCESS;
      },
      &png);
  if (status != CAIRO_STATUS_SUCCESS) {
    error = std::string("cairo cannot encode the PNG: ") +
            cairo_status_to_string(status);
    return false;
  }
  return true;
}

#else

const char *whyNoPng() {
  return "this planc was built without librsvg (Debian: librsvg2-dev), so "
         "it writes the timeline as .svg only";
}

bool renderSvgToPng(std::string_view, double, std::string &,
                    std::string &error) {
  error = whyNoPng();
  return false;
}

#endif

} // namespace plan
