/** The Public Chat page's script: the Widget, inline, with the configuration
 * the page carries (no second request, no inline script). The service is
 * where the page is, one level up from `/chat/{agentId}`. */
import { mount } from "./chat";
import type { WidgetConfiguration } from "./types";

const data = document.getElementById("svc-chat-data");
const host = document.getElementById("chat");
if (data && host) {
  const configuration = JSON.parse(data.textContent ?? "{}") as WidgetConfiguration;
  const baseUrl = new URL("..", document.baseURI).href;
  mount(host, { embedId: configuration.agentId, baseUrl, configuration, display: "inline", fetchConfiguration: false });
}
