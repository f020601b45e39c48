// The page's entry: routes on the path (/ui/ lists the runs, /ui/spaces/S/runs/R shows one).
import { logout } from "./api.js";
import { showRun } from "./run.js";
import { showRuns } from "./runs.js";

const main = document.getElementById("main");
const match = location.pathname.match(/^\/ui\/spaces\/([^/]+)\/runs\/([^/]+)$/);
if (match) {
  showRun(main, decodeURIComponent(match[1]), decodeURIComponent(match[2]));
} else {
  showRuns(main);
}

document.getElementById("logout").addEventListener("click", async () => {
  try {
    await logout();
  } finally {
    main.replaceChildren(Object.assign(document.createElement("p"), { role: "status", textContent: "Logged out. Run `spacesd ui` for a new login link." }));
  }
});
