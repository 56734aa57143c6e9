"""One route: ``POST /orders`` places an order (``shop.views.place_order``)."""

from __future__ import annotations

from django.urls import path

from shop import views

urlpatterns = [path("orders", views.place_order)]
