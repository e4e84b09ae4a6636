// Starts Swagger UI on /docs over the API's description (served by this server, nothing
// loaded from elsewhere). Kept in a file so the page's policy can forbid inline scripts.
window.addEventListener("load", function () {
  window.ui = SwaggerUIBundle({
    url: "/docs/openapi.json",
    dom_id: "#swagger-ui",
    deepLinking: true,
    presets: [SwaggerUIBundle.presets.apis],
    layout: "BaseLayout",
  });
});
