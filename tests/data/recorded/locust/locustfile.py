from locust import HttpUser, constant, events, task

LOG = open("requests.csv", "w", buffering=1)
LOG.write("start_time,response_time_ms\n")


@events.request.add_listener
def record(request_type, name, response_time, start_time=None, **kw):
    LOG.write(f"{start_time},{response_time}\n")


class Shopper(HttpUser):
    wait_time = constant(0.1)

    @task
    def home(self):
        self.client.get("/")
