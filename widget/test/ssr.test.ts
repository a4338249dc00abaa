// @vitest-environment node
import { createElement } from "react";
import { renderToString } from "react-dom/server";
import { expect, it } from "vitest";
import { SvcChat } from "../src/index";

it("server rendering outputs only the empty host element and touches no browser global", () => {
  expect(typeof window).toBe("undefined");
  const html = renderToString(createElement(SvcChat, { embedId: "agt_x", baseUrl: "https://svc.test" }));
  expect(html).toBe('<div data-svc-chat=""></div>');
});
