/** The Public Chat page's script: the Widget, inline, with the configuration
 * the page carries (no second request, no inline script). */
import { mount } from "./chat";
import type { WidgetConfiguration } from "./types";

const data = document.getElementById("svc-chat-data");
const host = document.getElementById("chat");
if (data && host) {
  const { baseUrl, configuration } = JSON.parse(data.textContent ?? "{}") as {
    baseUrl: string;
    configuration: WidgetConfiguration;
  };
  mount(host, { embedId: configuration.agentId, baseUrl, configuration, display: "inline", fetchConfiguration: false });
}
